/* Symbol export and C++ linkage for adjoin's public headers.
 *
 * The library is compiled with -fvisibility=hidden: only what a public header
 * declares between ADJ_BEGIN_DECLS and ADJ_END_DECLS is exported from
 * libadjoin.so, so helpers shared between the library's own files stay
 * private.  The same pair gives the declarations C linkage in C++.
 *
 * Rule for a new public header include/adjoin/<module>.h: include this file,
 * put every declaration between ADJ_BEGIN_DECLS and ADJ_END_DECLS, and include
 * the header from adjoin/adjoin.h.  A new public function needs nothing more
 * than being declared there with the adj_ prefix. */
#ifndef ADJOIN_EXPORT_H
#define ADJOIN_EXPORT_H

/* Marks one declaration as exported where a region cannot be used. */
#if defined(__GNUC__)
#define ADJ_EXPORT __attribute__((visibility("default")))
#define ADJ_VISIBILITY_PUSH_ _Pragma("GCC visibility push(default)")
#define ADJ_VISIBILITY_POP_ _Pragma("GCC visibility pop")
#else
#define ADJ_EXPORT
#define ADJ_VISIBILITY_PUSH_
#define ADJ_VISIBILITY_POP_
#endif

#ifdef __cplusplus
#define ADJ_BEGIN_DECLS extern "C" { ADJ_VISIBILITY_PUSH_
#define ADJ_END_DECLS ADJ_VISIBILITY_POP_ }
#else
#define ADJ_BEGIN_DECLS ADJ_VISIBILITY_PUSH_
#define ADJ_END_DECLS ADJ_VISIBILITY_POP_
#endif

#endif
