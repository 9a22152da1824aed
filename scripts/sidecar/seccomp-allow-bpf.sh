#!/usr/bin/env bash
# Writes a seccomp profile for application containers: the container engine's
# default profile with bpf(2) allowed, so that the preload library can open the
# sidecar's pinned maps (/sys/fs/bpf/smcr/optin, result) without giving the
# container capabilities. The kernel still checks the pins' file modes and
# refuses unprivileged map/program creation (kernel.unprivileged_bpf_disabled).
#   usage: scripts/sidecar/seccomp-allow-bpf.sh [DEFAULT_PROFILE] > smcr-seccomp.json
# DEFAULT_PROFILE: podman/CRI-O ship /usr/share/containers/seccomp.json (the
# default here); for docker use moby's profile/seccomp/default.json.
#   docker/podman run --security-opt seccomp=smcr-seccomp.json ...
set -euo pipefail
in=${1:-/usr/share/containers/seccomp.json}
[ -r "$in" ] || { echo "seccomp-allow-bpf: $in not readable (pass the engine's default profile)" >&2; exit 1; }
python3 - "$in" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
rules = []
for r in p.get("syscalls", []):
    names = [n for n in r.get("names", []) if n != "bpf"]
    if names:
        r["names"] = names
        rules.append(r)
rules.append({"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "args": [],
              "comment": "smcr: the preload library opens the sidecar's pinned maps"})
p["syscalls"] = rules
json.dump(p, sys.stdout, indent=1)
print()
EOF
