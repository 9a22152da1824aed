#!/usr/bin/env bash
# The sidecar image (Dockerfile, scripts/sidecar/, docs/SIDECAR.md), checked by
# scripts/sidecar/check-image.sh:
#   sidecar_test.sh          (ctest sidecar.image) without a container engine:
#                            Dockerfile stages vs entrypoint.sh, the image tree,
#                            the install step into a temporary volume, smc_run
#                            from it, ldd, load/check/status/SIGTERM as root
#   sidecar_test.sh engine   (ctest sidecar.engine) builds and runs the image
#                            with podman or docker; exit 77 (skipped) when no
#                            engine can run a local debian:12 image
# Environment from ctest: SMCR_BUILD_DIR, SMCR_SOURCE_DIR.
set -u
: "${SMCR_BUILD_DIR:?}"
: "${SMCR_SOURCE_DIR:?}"
mode=${1:-layout}
# The image ships the normal build; an ASan shim in the volume could not be
# preloaded into the application containers' non-ASan programs.
case "${SMCR_SANITIZE:-OFF}" in ON|on|1|TRUE|true|YES|yes)
  echo "[sidecar] SKIP: ASan build of the shim: the sidecar carries the normal build (run from build/)"; exit 77 ;;
esac
[ -f "$SMCR_BUILD_DIR/preload/libsmcr_preload.so" ] || { echo "[sidecar] SKIP: preload library not built"; exit 77; }
[ -x "$SMCR_BUILD_DIR/bpf/smcr_ctl" ] || { echo "[sidecar] SKIP: smcr_ctl not built (no bpftool/clang/libbpf/BTF)"; exit 77; }
exec bash "$SMCR_SOURCE_DIR/scripts/sidecar/check-image.sh" "$mode"
