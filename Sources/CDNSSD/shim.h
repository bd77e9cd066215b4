#ifndef LANCHAT_CDNSSD_SHIM_H
#define LANCHAT_CDNSSD_SHIM_H
// Avahi's Bonjour compatibility API (libavahi-compat-libdnssd-dev).
#include <dns_sd.h>
#endif
