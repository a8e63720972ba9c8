# Embeds every file under templates/ into the library as bytes, with its SHA-256 computed here, at
# build time. The installed library therefore needs no source tree, and the cache key reads the
# hashes from a table instead of hashing template text at run time.
function(fmha_jit_embed_templates)
  cmake_parse_arguments(ARG "" "TARGET;ROOT;OUTPUT" "" ${ARGN})
  file(GLOB_RECURSE template_files CONFIGURE_DEPENDS
       "${ARG_ROOT}/*.h" "${ARG_ROOT}/*.cuh" "${ARG_ROOT}/*.in")
  list(SORT template_files)
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DROOT=${ARG_ROOT} -DOUTPUT=${ARG_OUTPUT}
            "-DFILES=${template_files}" -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_templates.cmake
    DEPENDS ${template_files} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_templates.cmake
    COMMENT "Embedding device templates with their SHA-256"
    VERBATIM)
  add_custom_target(${ARG_TARGET} DEPENDS ${ARG_OUTPUT})
endfunction()
