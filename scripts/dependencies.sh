# Reads scripts/dependencies.txt, Loom's one list of packages. Source it from bash:
#   source scripts/dependencies.sh
#   loom_packages build test     # the packages in any of these groups, one a line, in the list's order
#   loom_packages gpu-libs       # Gloo's and oneDNN's packages (what the GPU check's packing carries)
#   loom_groups                  # every group the list names, one a line
# Without bash: awk '!/^#/ && / gpu-libs( |$)/ { print $1 }' scripts/dependencies.txt
loom_dependencies_file="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/dependencies.txt"

loom_packages() {
  awk -v groups="$*" '
    BEGIN { n = split(groups, wanted, " "); for (i = 1; i <= n; ++i) want[wanted[i]] = 1 }
    /^[[:space:]]*(#|$)/ { next }
    { for (i = 2; i <= NF; ++i) if ($i in want) { print $1; next } }' "$loom_dependencies_file"
}

loom_groups() {
  awk '/^[[:space:]]*(#|$)/ { next } { for (i = 2; i <= NF; ++i) print $i }' "$loom_dependencies_file" | sort -u
}
