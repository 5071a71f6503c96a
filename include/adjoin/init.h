/* Starting and stopping MPI for a program that uses adjoin.
 *
 * adj_init replaces the start-up every adjoin program repeats: it starts MPI
 * at the thread level the kernels need (MPI_THREAD_FUNNELED: their thread
 * teams never call MPI, only the thread that called the kernel does; see
 * adjoin/threads.h) and reports this process's rank and the world's size.
 * A program that has started MPI itself may still call it: adj_init then only
 * checks the thread level and leaves MPI to the program, and adj_finalize
 * leaves it running too.
 *
 *   int rank, size;
 *   if (adj_init(&argc, &argv, &rank, &size)) { print adj_last_error(); return 1; }
 *   ...
 *   adj_finalize();
 */
#ifndef ADJOIN_INIT_H
#define ADJOIN_INIT_H

#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Starts MPI with MPI_THREAD_FUNNELED unless it is already running, then
 * stores MPI_COMM_WORLD's rank and size in *rank and *size (either may be
 * NULL).  argc and argv are passed on to MPI and may be NULL.  ADJ_ERR_MPI
 * names the thread level when MPI provides less than FUNNELED, or when MPI has
 * already been finalized.  Collective on MPI_COMM_WORLD; call it from the
 * main thread. */
int adj_init(int *argc, char ***argv, int *rank, int *size);

/* Finalizes MPI if adj_init started it (otherwise does nothing, so a program
 * that started MPI itself also ends it).  Collective on MPI_COMM_WORLD;
 * returns ADJ_ERR_MPI with MPI's message if MPI_Finalize fails. */
int adj_finalize(void);

ADJ_END_DECLS

#endif
