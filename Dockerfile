# smcr sidecar image (docs/SIDECAR.md), Debian 12, packages only from Debian.
#
# The image holds, under /opt/smcr (laid out by scripts/sidecar/stage.sh):
#   bin/smc_run  bin/smcr_ctl  bin/smcr_stat  lib/smcr/libsmcr_preload.so
#   sidecar/entrypoint.sh
# Run privileged with the host's bpffs and cgroup2 and a shared volume, it
# copies smc_run, the preload library and smcr_stat into the volume (/smcr,
# SMCR_SHARE_DIR) for unmodified application containers, loads the eBPF
# program (smcr_ctl load, attached to the host's root cgroup) and waits:
#   docker run -d --privileged --cgroupns=host -v /sys/fs/bpf:/sys/fs/bpf \
#     -v /sys/fs/cgroup:/sys/fs/cgroup -v smcr:/smcr smcr-sidecar
#   docker run -v smcr:/smcr:ro -v /sys/fs/bpf:/sys/fs/bpf:ro \
#     --security-opt seccomp=smcr-seccomp.json app-image /smcr/bin/smc_run redis-server
# (app images need glibc >= 2.34, and libibverbs1 for the verbs fabric only;
# smcr-seccomp.json allows
# bpf(2): scripts/sidecar/seccomp-allow-bpf.sh)
# Entrypoint commands: run (default), install, load, unload, status, check.
# The image also works as a plain smcr toolbox (smc_run, smcr_ctl on PATH).

FROM debian:12 AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# bpf/CMakeLists.txt needs /sys/kernel/btf/vmlinux to build smcr_ctl; that is
# the build host's kernel as seen through the container (the program is CO-RE,
# it loads on other BTF kernels).
RUN rm -rf build && cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && cmake --build build -j"$(nproc)" --target smcr_preload smcr_ctl smcr_stat \
 && bash scripts/sidecar/stage.sh --strip build . /opt/smcr

FROM debian:12 AS sidecar
ENV DEBIAN_FRONTEND=noninteractive
# Runtime libraries (what ldd shows; the sidecar test checks this list):
# smcr_ctl needs libbpf1 libelf1 zlib1g, all of them libstdc++6 libgcc-s1;
# libibverbs1 (and its libnl-3-200 libnl-route-3-200) is for the verbs fabric
# of programs run in the image itself (the library opens it at run time).
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      libbpf1 libelf1 zlib1g libibverbs1 libnl-3-200 libnl-route-3-200 \
      libstdc++6 libgcc-s1 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/smcr /opt/smcr
ENV PATH=/opt/smcr/bin:$PATH SMCR_SHARE_DIR=/smcr
# Docker-format images only (podman/buildah: --format docker).
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s \
  CMD ["/opt/smcr/sidecar/entrypoint.sh", "check"]
ENTRYPOINT ["/opt/smcr/sidecar/entrypoint.sh"]
CMD ["run"]
