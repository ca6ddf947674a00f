# install_consumer.cmake — run by the InstallConsumer test (cmake -P): installs the build in
# ZL_BUILD_DIR into a fresh prefix under ZL_WORK_DIR, configures and builds the consumer project
# in ZL_CONSUMER_DIR against it with find_package(zerolab), runs it, and fails on any error or if
# the consumer does not report ZL_VERSION and a bitwise match.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${ZL_WORK_DIR}/prefix)
set(build ${ZL_WORK_DIR}/build)
file(REMOVE_RECURSE ${ZL_WORK_DIR})
run_step("cmake --install" ${CMAKE_COMMAND} --install ${ZL_BUILD_DIR} --prefix ${prefix})
run_step("configuring the consumer" ${CMAKE_COMMAND} -S ${ZL_CONSUMER_DIR} -B ${build}
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${ZL_CXX_COMPILER}
  -DCMAKE_PREFIX_PATH=${prefix})
run_step("building the consumer" ${CMAKE_COMMAND} --build ${build})
run_step("running the consumer" ${build}/consumer)
message(STATUS "${step_output}")
if(NOT step_output MATCHES "^zerolab ${ZL_VERSION} \\(.*bitwise equal to the reference")
  message(FATAL_ERROR "the consumer printed: ${step_output}")
endif()
file(REMOVE_RECURSE ${ZL_WORK_DIR})
