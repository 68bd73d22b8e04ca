/* Placeholder: filled in by the test_isolation suite. */
#include "helpers.h"
