# sim_timeouts.cmake — read by CTest after the discovered test_sim tests: 60 s each instead of
# the suite-wide 600 s, so a simulator hang fails fast. (The tests also bound their own time.)
if(DEFINED test_sim_TESTS)
  set_tests_properties(${test_sim_TESTS} PROPERTIES TIMEOUT 60)
endif()
