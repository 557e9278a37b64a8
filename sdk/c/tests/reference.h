/* The reference filter of spec/bridge.md §9. */
#ifndef HB_REFERENCE_H
#define HB_REFERENCE_H
#include "heddle_bridge.h"
hb_filter hb_reference_filter(void);
#endif
