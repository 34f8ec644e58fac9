"""Host set-up the container runtime needs: `python -m gpuyard.runtime.hostsetup` (as root).

Idempotent. On hybrid cgroup v1 hosts crun refuses to run unless the hugetlb controller has a
v1 mount; this mounts it at /sys/fs/cgroup/hugetlb when it is missing. runc needs nothing.
"""

from __future__ import annotations

import sys

from gpuyard.runtime.cgroups import ensure_hugetlb_mount


def main() -> int:
    try:
        mounted = ensure_hugetlb_mount()
    except OSError as e:
        print(f"gpuyard host set-up: {e}", file=sys.stderr)
        return 1
    print("mounted the hugetlb cgroup" if mounted else "host set-up: nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
