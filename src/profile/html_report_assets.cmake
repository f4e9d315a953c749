# Compiles the HTML report's style sheet and script into libgalley as strings (see
# embed_assets.cmake and html_report_assets.hpp). Included from src/CMakeLists.txt after the
# galley target exists.
set(galley_report_css ${CMAKE_CURRENT_LIST_DIR}/html_report.css)
set(galley_report_js ${CMAKE_CURRENT_LIST_DIR}/html_report.js)
set(galley_report_assets_cpp ${CMAKE_CURRENT_BINARY_DIR}/profile/html_report_assets.cpp)
add_custom_command(OUTPUT ${galley_report_assets_cpp}
  COMMAND ${CMAKE_COMMAND} -DCSS=${galley_report_css} -DJS=${galley_report_js}
          -DOUTPUT=${galley_report_assets_cpp} -P ${CMAKE_CURRENT_LIST_DIR}/embed_assets.cmake
  DEPENDS ${galley_report_css} ${galley_report_js} ${CMAKE_CURRENT_LIST_DIR}/embed_assets.cmake
  COMMENT "Embedding the HTML report's style sheet and script"
  VERBATIM)
target_sources(galley PRIVATE ${galley_report_assets_cpp})
