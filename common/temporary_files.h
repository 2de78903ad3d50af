/*
 * temporary_files.h — the temporary files a command has created and not yet published or removed,
 * so that a signal can remove them (common/interrupt.h). output_file.h registers each temporary it
 * creates and forgets it once published or abandoned.
 *
 * Registration takes a lock; temporary_files_remove_all takes none and calls only unlink, so a
 * signal handler may call it. At most TEMPORARY_FILES_MAX files are registered at once.
 */
#ifndef CPPARITY_COMMON_TEMPORARY_FILES_H
#define CPPARITY_COMMON_TEMPORARY_FILES_H

#define TEMPORARY_FILES_MAX 32

/* Registers path (copied); returns its slot, or -1 when every slot is taken or path is too long
 * (the file is then not removed by a signal; callers treat that as an error). */
int temporary_files_add(const char *path);

/* Forgets a slot returned by temporary_files_add (the file itself is left alone). -1 is ignored. */
void temporary_files_forget(int slot);

/* Removes every registered file and forgets it. Async-signal-safe. */
void temporary_files_remove_all(void);

#endif
