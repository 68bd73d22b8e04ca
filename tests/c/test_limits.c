/* Placeholder: filled in by the test_limits suite. */
#include "helpers.h"
