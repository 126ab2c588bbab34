#!/usr/bin/env python3
"""Lints the Containerfile without building it (the CUDA image needs NVIDIA's registry, which
CI cannot reach; the container test builds the CPU variant of the same file). Fails on:
  - an instruction that is not one of Docker's / podman's;
  - a stage name used twice, or a FROM / COPY --from naming a stage not defined above it;
  - a global ARG used inside a stage that does not declare it again (it would be empty there);
  - a COPY source missing from the tree or left out of the context by .dockerignore;
  - a COPY of scripts/install-deps.sh without the scripts it runs or sources (a stage that
    copies only the install scripts, before the sources, must copy all of them);
  - a RUN command that /bin/sh cannot parse (sh -n), CUDA-only branches included;
  - a CMD / ENTRYPOINT in JSON form that is not a JSON list of strings;
  - a .devcontainer/devcontainer.json that does not build a stage of this file;
  - base images other than the documented ones: NVIDIA's cudnn-devel / cudnn-runtime images of
    one CUDA version on Ubuntu 24.04 by default, Debian 12 for both stages with CUDA empty.
Usage: check_containerfile.py SOURCE_DIR
"""
import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY",
                "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL",
                "HEALTHCHECK", "SHELL"}


def instructions(text):
    """(line number, keyword, arguments) of each instruction, continuation lines joined."""
    result, pending, first = [], "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not pending:
            first = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = pending + stripped
        pending = ""
        keyword, _, arguments = whole.partition(" ")
        result.append((first, keyword, arguments.strip()))
    if pending:
        result.append((first, "<unterminated>", pending))
    return result


def expand(word, values):
    """Docker's ${NAME}, ${NAME:-word} and ${NAME:+word}, nested, and $NAME."""
    out, i = "", 0
    while i < len(word):
        if word.startswith("${", i):
            depth, j = 1, i + 2
            while depth:
                if word.startswith("${", j):
                    depth, j = depth + 1, j + 2
                    continue
                depth -= word[j] == "}"
                j += 1
            body = word[i + 2:j - 1]
            name, op, rest = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(:[-+])?(.*)", body, re.S).groups()
            value = values.get(name, "")
            if op == ":-":
                out += value if value else expand(rest, values)
            elif op == ":+":
                out += expand(rest, values) if value else ""
            else:
                out += value
            i = j
        elif word[i] == "$" and re.match(r"[A-Za-z_]", word[i + 1:i + 2]):
            name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", word[i + 1:]).group(0)
            out += values.get(name, "")
            i += 1 + len(name)
        else:
            out += word[i]
            i += 1
    return out


def used_names(text):
    return set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", text))


def ignored(path, patterns):
    return any(fnmatch.fnmatch(path, p) or path.startswith(p.rstrip("/") + "/") or
               fnmatch.fnmatch(path, p.replace("**/", "")) for p in patterns)


def main(source):
    source = Path(source)
    errors = []
    parsed = instructions((source / "Containerfile").read_text())
    ignore = [l.strip() for l in (source / ".dockerignore").read_text().splitlines()
              if l.strip() and not l.startswith("#")]
    # The files of scripts/ that install-deps.sh runs or sources (bash / source scripts/X).
    install_deps = (source / "scripts" / "install-deps.sh").read_text()
    install_deps_scripts = set(re.findall(r"(?:bash|source|\.)\s+(?:\S*/)?scripts/([\w.-]+)", install_deps))
    install_deps_scripts |= {"dependencies.txt"} if "dependencies.sh" in install_deps_scripts else set()

    global_args, stages, stage_args, froms = {}, [], set(), []
    for number, keyword, arguments in parsed:
        where = f"Containerfile:{number}"
        if keyword.upper() not in INSTRUCTIONS:
            errors.append(f"{where}: unknown instruction {keyword!r}")
            continue
        keyword = keyword.upper()
        if keyword == "ARG":
            name, _, default = arguments.partition("=")
            if not stages:
                global_args[name] = default.strip('"')
            else:
                stage_args.add(name)
        elif keyword == "FROM":
            match = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", arguments, re.I)
            image, name = match.group(1), match.group(2)
            if not used_names(image) <= set(global_args):
                errors.append(f"{where}: FROM uses {sorted(used_names(image) - set(global_args))}, not global ARGs")
            if not used_names(image) and "/" not in image and ":" not in image and image not in stages:
                errors.append(f"{where}: FROM {image}: no stage of that name above")
            if name in stages:
                errors.append(f"{where}: stage {name} defined twice")
            froms.append((number, image))
            stages.append(name or f"<stage {len(stages)}>")
            stage_args = set()
        else:
            if not stages:
                errors.append(f"{where}: {keyword} before the first FROM")
                continue
            undeclared = (used_names(arguments) & set(global_args)) - stage_args
            if undeclared:
                errors.append(f"{where}: uses the global ARG {sorted(undeclared)} without `ARG` in this stage")
            if keyword in ("COPY", "ADD"):
                words = [w for w in arguments.split() if not w.startswith("--")]
                from_stage = re.search(r"--from=(\S+)", arguments)
                if from_stage and from_stage.group(1) not in stages[:-1]:
                    errors.append(f"{where}: COPY --from={from_stage.group(1)}: no stage of that name above")
                if not from_stage and any(w.endswith("scripts/install-deps.sh") for w in words[:-1]):
                    copied = {Path(w).name for w in words[:-1]}
                    for needed in sorted(install_deps_scripts - copied):
                        errors.append(f"{where}: COPY of scripts/install-deps.sh without scripts/{needed}, which it runs")
                if not from_stage:
                    for src in words[:-1]:
                        path = src.rstrip("/")
                        if path not in (".", "") and not (source / path).exists():
                            errors.append(f"{where}: COPY source {src} does not exist")
                        elif path not in (".", "") and ignored(path, ignore):
                            errors.append(f"{where}: COPY source {src} is left out by .dockerignore")
            if keyword == "RUN" and not arguments.startswith("["):
                check = subprocess.run(["sh", "-n", "-c", arguments], capture_output=True, text=True)
                if check.returncode:
                    errors.append(f"{where}: RUN does not parse: {check.stderr.strip()}")
            if keyword in ("CMD", "ENTRYPOINT") and arguments.startswith("["):
                try:
                    value = json.loads(arguments)
                    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
                except (ValueError, AssertionError):
                    errors.append(f"{where}: {keyword} is not a JSON list of strings")

    # The base images of both variants, as the global ARGs' defaults make them.
    def images(overrides):
        values = dict(global_args)
        values.update(overrides)
        values = {k: expand(v, values) for k, v in values.items()}
        values = {k: expand(v, values) for k, v in values.items()}
        return [expand(image, values) for _, image in froms if used_names(image)]

    cuda = images({})
    version = global_args.get("CUDA", "")
    expected = [f"docker.io/nvidia/cuda:{version}-cudnn-devel-ubuntu24.04",
                f"docker.io/nvidia/cuda:{version}-cudnn-runtime-ubuntu24.04"]
    if not re.fullmatch(r"13\.\d+\.\d+", version) or cuda != expected:
        errors.append(f"default (CUDA) variant: base images {cuda}, expected {expected} with CUDA 13.x.y")
    cpu = images({"CUDA": ""})
    if cpu != ["docker.io/library/debian:12"] * 2:
        errors.append(f"CPU variant (CUDA empty): base images {cpu}, expected debian:12 for both stages")
    local = images({"CUDA": "", "BASE": "localhost/loom-base:debian12"})
    if local != ["localhost/loom-base:debian12"] * 2:
        errors.append(f"CPU variant on a local BASE: base images {local}, expected that image for both stages")

    # The development container builds a stage of this file.
    devcontainer = json.loads((source / ".devcontainer" / "devcontainer.json").read_text())
    build = devcontainer.get("build", {})
    if (source / ".devcontainer" / build.get("dockerfile", "")).resolve() != (source / "Containerfile").resolve():
        errors.append(f".devcontainer/devcontainer.json: builds {build.get('dockerfile')}, not ../Containerfile")
    if build.get("target") not in stages:
        errors.append(f".devcontainer/devcontainer.json: target {build.get('target')!r} is no stage of the Containerfile")

    for error in errors:
        print(error)
    print(f"check_containerfile: {len(parsed)} instructions, {len(stages)} stages "
          f"({', '.join(stages)}); default images {cuda}; CPU images {cpu}; "
          f"{'OK' if not errors else f'{len(errors)} problem(s)'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
