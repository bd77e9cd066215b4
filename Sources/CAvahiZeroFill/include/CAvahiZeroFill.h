#ifndef LANCHAT_CAVAHIZEROFILL_H
#define LANCHAT_CAVAHIZEROFILL_H
// Defines avahi_malloc (see avahi_zero_fill.c); nothing to call.
#endif
