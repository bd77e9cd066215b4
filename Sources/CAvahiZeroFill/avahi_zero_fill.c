// Avahi 0.8's dns_sd compat layer allocates each DNSServiceRef with avahi_new (malloc, not zeroed) and
// sets only the callback slot of the call that created it. On AVAHI_CLIENT_FAILURE (avahi-daemon
// stops or restarts) generic_client_callback calls the first non-NULL slot among browse, resolve,
// domain and query: for a Resolve or QueryRecord ref that is stale heap data. Fixed upstream in
// avahi dffd549f (PR #569, "libdns_sd: Use allocator with memory set to zero"), not in Debian 12.
// This definition interposes avahi-common's avahi_malloc for the whole process (the executable's
// symbol wins over libavahi-common's for libdns_sd, libavahi-client and libavahi-common alike):
// same contract (NULL for 0 bytes, abort when out of memory), but zero-filled.
#include <stdlib.h>

void *avahi_malloc(size_t size) {
    if (size == 0) return NULL;
    void *p = calloc(1, size);
    if (!p) abort();
    return p;
}
