# Read by ctest after the gtest discovery files: the tuner's tests compare the wall-clock times of
# sleeping and busy-waiting solvers (0.2 ms against 1 ms, two 2 ms twins within 3%). Beside other
# tests on a loaded 2-core machine, preemption decides them instead of the tuner, so they run alone.
foreach(test IN LISTS galley_tuning_tests_TESTS)
  if(test MATCHES "^Tuner(InnerChoice)?\\.")
    set_tests_properties("${test}" PROPERTIES RUN_SERIAL TRUE)
  endif()
endforeach()
