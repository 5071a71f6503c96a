/* Process-wide settings from the environment or the API (setting_impl.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "setting_impl.h"

enum { ADJ_SETTING_UNREAD = 0, ADJ_SETTING_ENVIRONMENT = 1, ADJ_SETTING_API = 2 };

const char *adj_setting_text(adj_setting *setting) {
  if (setting->source == ADJ_SETTING_UNREAD) {
    const char *value = getenv(setting->variable);
    /* A value too long for any setting is kept cut, and so refused by its parser. */
    snprintf(setting->text, sizeof setting->text, "%s", value ? value : "");
    setting->source = ADJ_SETTING_ENVIRONMENT;
  }
  return setting->text;
}

int adj_setting_set(adj_setting *setting, const char *text) {
  ADJ_CHECK(text && strlen(text) < sizeof setting->text, ADJ_ERR_ARG,
            "%s: the value set must be a string shorter than %d bytes", setting->variable, ADJ_SETTING_TEXT_MAX);
  snprintf(setting->text, sizeof setting->text, "%s", text);
  setting->source = ADJ_SETTING_API;
  return ADJ_SUCCESS;
}

/* "a, b, c" or, numbered, "a (0), b (1), c (2)". */
static void adj_setting_names(const char *const *names, int count, bool numbered, char *list, size_t size) {
  list[0] = '\0';
  for (int i = 0; i < count; i++) {
    size_t used = strlen(list);
    if (numbered) snprintf(list + used, size - used, "%s%s (%d)", i ? ", " : "", names[i], i);
    else snprintf(list + used, size - used, "%s%s", i ? ", " : "", names[i]);
  }
}

int adj_setting_choice(adj_setting *setting, const char *const *names, int count, int *choice) {
  const char *text = adj_setting_text(setting);
  *choice = 0;
  if (!*text) return ADJ_SUCCESS;
  for (int i = 0; i < count; i++)
    if (!strcmp(text, names[i])) {
      *choice = i;
      return ADJ_SUCCESS;
    }
  char list[256];
  adj_setting_names(names, count, false, list, sizeof list);
  return ADJ_FRAME(adj_error_set(ADJ_ERR_ARG, "%s='%s' is not one of %s", setting->variable, text, list));
}

int adj_setting_get_choice(adj_setting *setting, const char *who, const void *out, const char *const *names,
                           int count, int *index) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "%s: output pointer is NULL", who);
  return adj_setting_choice(setting, names, count, index);
}

int adj_setting_set_choice(adj_setting *setting, const char *who, const char *const *names, int count, int index) {
  if (index < 0 || index >= count) {
    char list[256];
    adj_setting_names(names, count, true, list, sizeof list);
    return ADJ_FRAME(adj_error_set(ADJ_ERR_ARG, "%s: %d is not one of %s", who, index, list));
  }
  return adj_setting_set(setting, names[index]);
}
