# Sourced by the tests that need PyTorch 2.x's torchrun: sets py (LOOM_TORCH_PYTHON, else
# /usr/bin/python3) and version, or exits 77 (skipped) saying why.
py=${LOOM_TORCH_PYTHON:-/usr/bin/python3}
version=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
  { echo "skipped: no PyTorch for $py (set LOOM_TORCH_PYTHON to a Python with PyTorch 2.x)"; exit 77; }
case $version in
  0.*|1.*) echo "skipped: PyTorch $version at $py: its agent store speaks the pre-2.x protocol" \
                "(set LOOM_TORCH_PYTHON to a Python with PyTorch 2.x)"; exit 77 ;;
esac
echo "PyTorch $version ($py)"
free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
