# Warnings for our own targets; SA_WERROR makes them errors (CI turns it on).
function(sa_set_warnings target)
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4 $<$<BOOL:${SA_WERROR}>:/WX>)
  else()
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
      $<$<AND:$<COMPILE_LANGUAGE:C,CXX>,$<BOOL:${SA_WERROR}>>:-Werror>)
    # The sanitizers' instrumentation makes GCC's flow-based maybe-uninitialized analysis report
    # false positives inside libstdc++ (std::function in <regex>); the release build keeps it.
    if(SA_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C,CXX>:-Wno-maybe-uninitialized>)
    endif()
    # Device code: every nvcc warning, and the host compiler's on the host half of .cu files.
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
      $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SA_WERROR}>>:-Werror=all-warnings -Xcompiler=-Werror>)
  endif()
endfunction()

if(SA_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=address,undefined)
endif()
# No multiply and add fused into one rounding where the compiler could (-march=native, AArch64):
# the CPU kernel sets give the reference's bits only if both round every product.
if(NOT MSVC)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-ffp-contract=off>)
endif()
if(SA_NATIVE)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-march=native>)
endif()
