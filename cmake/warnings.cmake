# Warnings for our own targets; SA_WERROR makes them errors (CI turns it on).
function(sa_set_warnings target)
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4 $<$<BOOL:${SA_WERROR}>:/WX>)
  else()
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
      -Wno-sign-conversion $<$<BOOL:${SA_WERROR}>:-Werror>)
    # The sanitizers' instrumentation makes GCC's flow-based maybe-uninitialized analysis report
    # false positives inside libstdc++ (std::function in <regex>); the release build keeps it.
    if(SA_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
    endif()
  endif()
endfunction()

if(SA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
if(SA_NATIVE)
  add_compile_options(-march=native)
endif()
