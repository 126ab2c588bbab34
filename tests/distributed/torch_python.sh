# Sourced by the tests that run PyTorch's torchrun: sets py (LOOM_TORCH_PYTHON, else
# /usr/bin/python3, Debian's PyTorch 1.13) and version, or exits 77 (skipped) saying why.
# torchrun's options are spelt with underscores (--nproc_per_node): 1.13 knows no other
# spelling, and 2.x knows both.
py=${LOOM_TORCH_PYTHON:-/usr/bin/python3}
version=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
  { echo "skipped: no PyTorch for $py (set LOOM_TORCH_PYTHON to a Python with PyTorch)"; exit 77; }
echo "PyTorch $version ($py)"
free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# torchrun_logs DIR: torchrun options for the workers' stdout; torchrun_stdout DIR LOG appends
# it to LOG. Debian's 1.13 torchrun fails at start on Python 3.11 with its default --redirects
# 0 and --tee 0 (Std is an IntFlag, whose aliases NONE (0) and ALL (3) Python 3.11 no longer
# iterates: Std.from_str("0") is None), so there the workers' stdout goes to files under DIR
# (1, OUT, parses) and to the console with torchrun's "[default0]:" prefixes; the files,
# unprefixed, are appended to the log afterwards.
case $version in
  1.*) torchrun_logs() { echo "--redirects 1 --tee 1 --log_dir $1"; } ;;
  *) torchrun_logs() { :; } ;;
esac
torchrun_stdout() { [ ! -d "$1" ] || find "$1" -name stdout.log -type f | sort | xargs -r cat >> "$2"; }
