# GLSL compute shaders -> SPIR-V embedded in the library.
#
# Each shaders/*.comp declares its variants in lines of the form
#   //! variant NAME [DEFINE=VALUE ...]
# and each variant is compiled by glslc with those defines into NAME's SPIR-V. The generated
# header sa_shaders.h lists every variant as sa::vk::shader::NAME, so the host code names the
# variants the shaders declare and a missing one does not compile: the list lives in one place.
function(sa_embed_shaders out_dir out_sources)
  file(GLOB shader_files CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/shaders/*.comp)
  file(GLOB shader_includes CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/shaders/*.glsl)
  list(SORT shader_files)
  set(names)
  set(incs)
  foreach(src IN LISTS shader_files)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
    file(STRINGS ${src} decls REGEX "^//! variant ")
    if(NOT decls)
      message(FATAL_ERROR "${src} declares no variant (a line '//! variant NAME [DEFINE=VALUE ...]')")
    endif()
    foreach(decl IN LISTS decls)
      string(REGEX REPLACE "^//! variant +" "" decl "${decl}")
      separate_arguments(parts UNIX_COMMAND "${decl}")
      list(GET parts 0 name)
      list(LENGTH parts n_parts)
      set(defines)
      if(n_parts GREATER 1)
        list(SUBLIST parts 1 -1 defs)
        foreach(d IN LISTS defs)
          list(APPEND defines "-D${d}")
        endforeach()
      endif()
      if(name IN_LIST names)
        message(FATAL_ERROR "shader variant ${name} is declared twice")
      endif()
      list(APPEND names ${name})
      set(out ${out_dir}/${name}.spv.inc)
      add_custom_command(OUTPUT ${out}
        COMMAND ${SA_GLSLC} --target-env=vulkan1.2 -O -Werror -mfmt=num
                -I ${CMAKE_CURRENT_SOURCE_DIR}/shaders ${defines} -o ${out} ${src}
        DEPENDS ${src} ${shader_includes}
        COMMENT "glslc ${name}"
        VERBATIM)
      list(APPEND incs ${out})
    endforeach()
  endforeach()
  list(LENGTH names n_names)
  set(enum_body "")
  set(table_body "")
  set(arrays "")
  foreach(name IN LISTS names)
    string(APPEND enum_body "  ${name},\n")
    string(APPEND arrays "const uint32_t k_${name}[] = {\n#include \"${name}.spv.inc\"\n};\n")
    string(APPEND table_body "    {\"${name}\", k_${name}, sizeof(k_${name}) / sizeof(uint32_t)},\n")
  endforeach()
  file(WRITE ${out_dir}/sa_shaders.h.tmp
"// Generated from the '//! variant' lines of shaders/*.comp: do not edit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sa::vk {

enum class shader : uint32_t {
${enum_body}};

struct shader_code {
  const char* name;
  const uint32_t* words;
  size_t n_words;
};

constexpr size_t k_shader_count = ${n_names};
extern const shader_code k_shaders[k_shader_count];

}  // namespace sa::vk
")
  file(WRITE ${out_dir}/sa_shaders.cpp.tmp
"// Generated from the '//! variant' lines of shaders/*.comp: do not edit.
#include \"sa_shaders.h\"

namespace sa::vk {

namespace {
${arrays}}  // namespace

const shader_code k_shaders[k_shader_count] = {
${table_body}};

}  // namespace sa::vk
")
  # Rewritten only when the list changes, so a shader edit rebuilds its SPIR-V alone.
  configure_file(${out_dir}/sa_shaders.h.tmp ${out_dir}/sa_shaders.h COPYONLY)
  configure_file(${out_dir}/sa_shaders.cpp.tmp ${out_dir}/sa_shaders.cpp COPYONLY)
  set_source_files_properties(${out_dir}/sa_shaders.cpp PROPERTIES OBJECT_DEPENDS "${incs}")
  set(${out_sources} ${out_dir}/sa_shaders.cpp PARENT_SCOPE)
endfunction()
