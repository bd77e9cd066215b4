#include <sqlite3.h>
// statfs: the store keeps SQLite's exclusive locking on a network file system (ChatStore.onNetworkFileSystem).
#include <sys/vfs.h>
