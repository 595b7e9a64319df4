#!/usr/bin/env bash
# Make Slurm available for tests/cli/test_sbatch_script.py, which runs the README's batch script
# on a one-machine cluster it starts itself (nothing is configured or started here).
# Idempotent and quiet: with slurmctld, slurmd and sbatch installed it does nothing; as root
# with apt-get it installs Debian's slurm-wlm, saying so in one line (the apt log goes to
# $SLURM_INSTALL_LOG, default /tmp/gnnscale-slurm-install.log); elsewhere it says in one line
# why not, and the test skips.
# Exit status 0: Slurm is installed; 1: it is not (`make test` goes on either way).
set -uo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

installed() { command -v slurmctld && command -v slurmd && command -v sbatch; } >/dev/null 2>&1

installed && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "slurm: not installed and not installable here (needs root and apt-get): the sbatch" \
         "script test will skip"
    exit 1
fi
log=${SLURM_INSTALL_LOG:-/tmp/gnnscale-slurm-install.log}
echo "slurm: installing slurm-wlm with apt-get for the sbatch script test (log: $log)"
export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -q -y -o DPkg::Lock::Timeout=300)
# The packages' services (munge, slurmd, slurmctld) are not started: the test runs its own.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    trap 'rm -f "$policy"' EXIT
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
fi
{
    # A fresh image has empty package lists: update only when apt knows no candidate.
    if ! apt-cache policy slurm-wlm 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        "${apt[@]}" update
    fi
    "${apt[@]}" install --no-install-recommends slurm-wlm
} >"$log" 2>&1
if installed; then
    exit 0
fi
echo "slurm: installing slurm-wlm failed ($(grep -m 1 '^E:' "$log" || tail -n 1 "$log")):" \
     "the sbatch script test will skip"
exit 1
