# verbs_link_test: the verbs fabric on a real (soft-)RoCE device. It runs
# inside the QEMU guest (scripts/guest/run.sh -- build/tests/guest/verbs_link_test)
# and exits 77 (skip) where there is no RDMA device or no rdma-core.
# Included from tests/guest/CMakeLists.txt: include(verbs.cmake)
add_executable(verbs_link_test ${CMAKE_CURRENT_LIST_DIR}/verbs_link_test.cc)
target_link_libraries(verbs_link_test PRIVATE smcr_core)
