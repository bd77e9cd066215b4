#include <sqlite3.h>
// statfs: the store keeps SQLite's exclusive locking on a network file system (ChatStore.onNetworkFileSystem).
#include <sys/vfs.h>

// sqlite3_config is variadic (Swift cannot call it): SQLite's count of the memory it allocated, kept
// under a mutex that every allocation takes (7 % of the store thread's time storing a newcomer's history),
// is turned off. Only before SQLite is initialized: later it fails harmlessly (SQLITE_MISUSE).
static inline int lanchat_sqlite_without_memory_status(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

