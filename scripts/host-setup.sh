#!/bin/sh
# Host set-up for the OCI runtimes (run as root; idempotent; never fatal).
# On hybrid cgroup hosts (v1 controllers plus a v2 mount) crun refuses to run until the
# hugetlb controller has a v1 mount; runc works without it and is the fallback.
set -u
if [ -d /sys/fs/cgroup/memory ] && [ -d /sys/fs/cgroup/unified ] \
   && ! grep -q ' /sys/fs/cgroup/hugetlb cgroup ' /proc/mounts \
   && grep -qw hugetlb /proc/cgroups; then
  mkdir -p /sys/fs/cgroup/hugetlb 2>/dev/null \
    && mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb 2>/dev/null \
    && echo "host-setup: mounted the v1 hugetlb cgroup controller (for crun on hybrid cgroups)" \
    || echo "host-setup: could not mount the hugetlb controller; gpuyard will use runc"
fi
exit 0
