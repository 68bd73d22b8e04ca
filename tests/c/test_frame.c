/* Placeholder: filled in by the test_frame suite. */
#include "helpers.h"
