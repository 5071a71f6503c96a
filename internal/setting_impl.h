/* Process-wide settings that an environment variable gives and a setter of
 * the API replaces (docs/configuration.md lists them).  The variable is read
 * once, at the setting's first use; once the setter has been called its value
 * holds for the rest of the process and the variable is no longer consulted.
 * Under mpiexec every rank sees the same environment, so a bad value fails
 * alike on every rank; a program that calls a setter calls it on every rank.
 *
 * A setting holds text, as the variable does; each module parses it (setters
 * store the canonical name of the value they were given, so it parses). */
#ifndef ADJOIN_SETTING_IMPL_H
#define ADJOIN_SETTING_IMPL_H

#include <stdbool.h>

enum { ADJ_SETTING_TEXT_MAX = 4096 };

typedef struct adj_setting {
  const char *variable; /* the environment variable, e.g. "ADJ_HALO_ALGORITHM" */
  int source;           /* 0 not read yet, 1 the environment, 2 the setter */
  char text[ADJ_SETTING_TEXT_MAX];
} adj_setting;

#define ADJ_SETTING_INIT(variable) {(variable), 0, {0}}

/* The setting's text: the setter's, else the variable's value when first
 * read; "" when neither gave one (the module's built-in default). */
const char *adj_setting_text(adj_setting *setting);

/* Replaces the environment's value for the rest of the process; "" restores
 * the built-in default.  ADJ_ERR_ARG for a text of ADJ_SETTING_TEXT_MAX bytes
 * or more. */
int adj_setting_set(adj_setting *setting, const char *text);

/* The index in names[0..count) of the setting's text, 0 (the first name, the
 * built-in default) when it is "".  ADJ_ERR_ARG naming the variable, its
 * value and the names when it is none of them. */
int adj_setting_choice(adj_setting *setting, const char *const *names, int count, int *choice);

/* The getter's and setter's halves of a setting whose values are an enum
 * numbered as names: the index of the setting's text (ADJ_ERR_ARG naming
 * `who` when out, the caller's output pointer, is NULL), and storing
 * names[index] (ADJ_ERR_ARG naming `who`, the index and every name when it is
 * out of range). */
int adj_setting_get_choice(adj_setting *setting, const char *who, const void *out, const char *const *names,
                           int count, int *index);
int adj_setting_set_choice(adj_setting *setting, const char *who, const char *const *names, int count, int index);

/* Defines PREFIX_get_default(TYPE *) and PREFIX_set_default(TYPE), the
 * public getter and setter of an enum setting whose values are numbered as the
 * array NAMES (NAMES[0] the built-in default). */
#define ADJ_SETTING_CHOICE_ACCESSORS(prefix, type, setting, names)                                          \
  int prefix##_get_default(type *value) {                                                                   \
    int index = 0;                                                                                          \
    int status = adj_setting_get_choice(&(setting), #prefix "_get_default", value, names,                   \
                                        (int)(sizeof names / sizeof names[0]), &index);                     \
    if (!status) *value = (type)index;                                                                      \
    return status;                                                                                          \
  }                                                                                                         \
  int prefix##_set_default(type value) {                                                                    \
    return adj_setting_set_choice(&(setting), #prefix "_set_default", names,                                \
                                  (int)(sizeof names / sizeof names[0]), (int)value);                       \
  }

#endif
