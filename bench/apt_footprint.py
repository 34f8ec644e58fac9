"""What `make run` and `make test` would install with apt on a fresh machine: packages,
download and installed size, simulated with `apt-get install -s` against a dpkg status that
holds only the packages of that fresh machine (no root, nothing installed).

Two fresh machines: Debian's minimal base (the packages of priority `required`, what
debootstrap's minbase installs), and, with `--image LIST` (a file with one `name` or
`name<TAB>...` a line, `#` comments), a given image. Each list of packages is tried with and
without `--no-install-recommends`, so the saving is shown too.

Usage: python3 bench/apt_footprint.py [--image installed.txt] (run `apt-get update` first)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parent.parent / "Makefile"
STATUS = Path("/var/lib/dpkg/status")
INST = re.compile(r"^Inst (\S+) ")


def make_list(name: str) -> list[str]:
    """RUN_APT or TEST_APT as the Makefile has it."""
    match = re.search(rf"^{name}\s*:=\s*(.+)$", MAKEFILE.read_text(), re.MULTILINE)
    if not match:
        raise SystemExit(f"no {name} in {MAKEFILE}")
    return match.group(1).split()


def stanzas() -> dict[str, str]:
    """This machine's dpkg status, one stanza per installed package."""
    out = {}
    for block in STATUS.read_text().split("\n\n"):
        name = re.search(r"^Package: (\S+)", block, re.MULTILINE)
        if name and "\nStatus: install ok installed" in block:
            out[name.group(1)] = block.strip()
    return out


def base_required(status: dict[str, str]) -> set[str]:
    """The packages of priority required, and what they depend on, as installed here."""
    return closure({n for n, block in status.items() if "\nPriority: required" in block}, status)


def depends(block: str) -> list[list[str]]:
    """A stanza's Depends and Pre-Depends: each a list of alternative package names."""
    fields = re.findall(r"^(?:Pre-)?Depends: (.+)$", block, re.MULTILINE)
    return [[re.sub(r"[\s(:].*", "", alt.strip()) for alt in dep.split("|")]
            for line in fields for dep in line.split(",")]


def closure(names: set[str], status: dict[str, str]) -> set[str]:
    provides = {p.strip().split(" ")[0]: name for name, block in status.items()
                for line in re.findall(r"^Provides: (.+)$", block, re.MULTILINE)
                for p in line.split(",")}
    todo, done = list(names), set()
    while todo:
        name = todo.pop()
        if name in done or name not in status:
            continue
        done.add(name)
        for alternatives in depends(status[name]):
            found = [a if a in status else provides.get(a) for a in alternatives]
            todo += [next((f for f in found if f), alternatives[0])]
    return done


def image_list(path: Path) -> set[str]:
    """Names from a list of one package a line (`name` or `apt<TAB>name<TAB>version`)."""
    names = set()
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            cols = line.split("\t")
            names.add((cols[1] if cols[0] == "apt" and len(cols) > 1 else cols[0]).split(":")[0])
    return names


def simulate(base: set[str], status: dict[str, str], packages: list[str], recommends: bool):
    """The packages apt would install on a machine that has `base`."""
    with tempfile.NamedTemporaryFile("w", suffix=".status") as fake:
        fake.write("\n\n".join(status[n] for n in sorted(base) if n in status) + "\n")
        fake.flush()
        args = ["apt-get", "-s", "-o", f"Dir::State::status={fake.name}", "install", "-y"]
        args += [] if recommends else ["--no-install-recommends"]
        done = subprocess.run(args + packages, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return [m.group(1) for line in done.stdout.splitlines() if (m := INST.match(line))]


def sizes(packages: list[str]) -> tuple[int, int]:
    """(download bytes, installed KiB) of the candidate versions."""
    if not packages:
        return 0, 0
    shown = subprocess.run(["apt-cache", "show", "--no-all-versions", *packages],
                           capture_output=True, text=True, check=False).stdout
    download = sum(int(x) for x in re.findall(r"^Size: (\d+)", shown, re.MULTILINE))
    installed = sum(int(x) for x in re.findall(r"^Installed-Size: (\d+)", shown, re.MULTILINE))
    return download, installed


def row(label: str, packages: list[str]) -> str:
    download, installed = sizes(packages)
    return (f"{label:<52} {len(packages):>5} {download / 1e6:>9.1f} {installed / 1024:>10.1f}")


def report(title: str, base: set[str], status: dict[str, str]) -> None:
    run, test = make_list("RUN_APT"), make_list("TEST_APT")
    print(f"\n{title} ({len(base)} packages there)")
    print(f"{'what':<52} {'pkgs':>5} {'dl MB':>9} {'inst MiB':>10}")
    for label, packages, recommends in (
        ("make run: RUN_APT, --no-install-recommends", run, False),
        ("RUN_APT with recommends", run, True),
        ("make test: RUN_APT + TEST_APT, --no-install-recommends", run + test, False),
        ("RUN_APT + TEST_APT with recommends (before issue 17)", run + test, True),
    ):
        print(row(label, simulate(base, status, packages, recommends)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", type=Path, help="the package list of a fresh image")
    args = parser.parse_args()
    status = stanzas()
    report("Debian minimal base (priority required)", base_required(status), status)
    if args.image:
        report(f"image {args.image.name}", image_list(args.image) & set(status), status)


if __name__ == "__main__":
    main()
