# entmtp serve: built when libmicrohttpd is found (scripts/setup-deps.sh
# installs libmicrohttpd-dev). The chat page is embedded as a byte array
# generated at configure time, so the binary serves it with no files around.
pkg_check_modules(MHD IMPORTED_TARGET libmicrohttpd)
if(MHD_FOUND)
  set(_page ${CMAKE_CURRENT_LIST_DIR}/chat.html)
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_page})
  file(READ ${_page} _hex HEX)
  string(LENGTH "${_hex}" _n)
  math(EXPR _n "${_n} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
  file(WRITE ${CMAKE_BINARY_DIR}/generated/serve_chat_html.c
    "/* generated from tools/entmtp/serve/chat.html */\n#include <stddef.h>\n"
    "const unsigned char serve_chat_html[] = {${_bytes}0};\n"
    "const size_t serve_chat_html_len = ${_n};\n")
  file(GLOB _serve_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.c)
  target_sources(entmtp_cli PRIVATE ${_serve_sources} ${CMAKE_BINARY_DIR}/generated/serve_chat_html.c)
  target_link_libraries(entmtp_cli PRIVATE PkgConfig::MHD)
  target_compile_definitions(entmtp_cli PRIVATE ENTMTP_HAVE_SERVE)
else()
  message(STATUS "libmicrohttpd not found: entmtp serve is not built")
endif()
