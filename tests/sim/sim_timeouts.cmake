# sim_timeouts.cmake — read by CTest after the discovered test_sim and test_faults tests: 60 s each
# instead of the suite-wide 600 s, so a simulator hang fails fast. (The tests also bound their own
# time.) The properties of test_faults run whole trainings and get 300 s. The test of a 1 ms
# collective timeout runs alone (RUN_SERIAL): another test's threads on the same two cores can
# stretch a healthy rank's arrival past 1 ms, and it names the late ranks.
if(DEFINED test_sim_TESTS)
  set_tests_properties(${test_sim_TESTS} PROPERTIES TIMEOUT 60)
  foreach(test IN LISTS test_sim_TESTS)
    if(test MATCHES "one_ms_timeout")
      set_tests_properties(${test} PROPERTIES RUN_SERIAL TRUE)
    endif()
  endforeach()
endif()
if(DEFINED test_faults_TESTS)
  set_tests_properties(${test_faults_TESTS} PROPERTIES TIMEOUT 60)
  foreach(test IN LISTS test_faults_TESTS)
    if(test MATCHES "prop_")
      set_tests_properties(${test} PROPERTIES TIMEOUT 300)
    endif()
  endforeach()
endif()
