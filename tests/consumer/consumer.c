/* Links against an installed sa and checks the header and library agree. */
#include <stdio.h>
#include <string.h>

#include <sa/sa.h>

int main(void) {
  sa_model *model = NULL;
  if (sa_version_number() != SA_VERSION_NUMBER) {
    fprintf(stderr, "header %s, library %s\n", SA_VERSION_STRING, sa_version_string());
    return 1;
  }
  if (sa_model_load("does-not-exist.gguf", NULL, &model) != SA_ERR_IO || model != NULL) return 1;
  printf("sa %s installed and usable\n", sa_version_string());
  return 0;
}
