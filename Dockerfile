# Minimal Debian 12 image with smcr built and installed in /opt/smcr:
#   /opt/smcr/bin/smc_run, /opt/smcr/bin/smcr_ctl, /opt/smcr/lib/smcr/libsmcr_preload.so
# Loading the eBPF program needs a privileged container on a host with cgroup v2
# and bpffs (docker run --privileged ... /opt/smcr/bin/smcr_ctl load).
# (The sidecar image is a separate, later piece.)
FROM debian:12 AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# bpf/CMakeLists.txt needs /sys/kernel/btf/vmlinux to build smcr_ctl; that is
# the build host's kernel as seen through the container.
RUN rm -rf build && cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && cmake --build build -j"$(nproc)" --target smcr_preload smcr_ctl \
 && mkdir -p /opt/smcr/bin /opt/smcr/lib/smcr \
 && install -m 0755 scripts/smc_run /opt/smcr/bin/smc_run \
 && install -m 0755 build/bpf/smcr_ctl /opt/smcr/bin/smcr_ctl \
 && install -m 0755 build/preload/libsmcr_preload.so /opt/smcr/lib/smcr/libsmcr_preload.so

FROM debian:12
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libbpf1 libelf1 zlib1g libstdc++6 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/smcr /opt/smcr
# smc_run looks for the library in ../lib/smcr relative to itself.
ENV PATH=/opt/smcr/bin:$PATH
CMD ["smc_run", "--help"]
