# Interoperability with the Linux kernel's own SMC (AF_SMC) between two QEMU
# guests over soft-RoCE: tests/guest/interop_test.sh (runs on the host, boots
# guest pairs with scripts/guest/run-pair.sh). af_smc_echo is the kernel-side
# peer (socket(AF_SMC, ...)); tests/guest/smc_pnet.py configures kernel SMC.
# Included from tests/guest/CMakeLists.txt.
add_executable(af_smc_echo ${CMAKE_CURRENT_LIST_DIR}/af_smc_echo.c)
set_target_properties(af_smc_echo PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/guest)

add_test(NAME guest.linux_interop
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/interop_test.sh
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(guest.linux_interop PROPERTIES
  ENVIRONMENT "SMCR_BUILD_DIR=${PROJECT_BINARY_DIR};SMCR_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
  SKIP_RETURN_CODE 77
  LABELS guest
  RUN_SERIAL TRUE
  TIMEOUT 1800)
