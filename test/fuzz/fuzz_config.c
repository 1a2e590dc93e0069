/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX_SYNCMEM_* values (the iface and memory domain tables), as a user or
 * a job launcher sets them: one variable of the table chosen by the first
 * byte, set to the rest of the input. Reading the table gives an error or
 * a configuration that releases cleanly.
 */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ucs_config_global_list_entry_t *entry;
    ucs_config_field_t *table, *f;
    char name[128], *value;
    unsigned count, pick;
    void *opts;

    if (size < 1) {
        return 0;
    }
    entry = (data[0] & 0x80) ? &uct_syncmem_component.md_config :
                               &uct_syncmem_tl.config;
    table = entry->table;
    for (count = 0, f = table; f->name != NULL; ++f, ++count) {
    }
    pick = (data[0] & 0x7f) % count;
    if (table[pick].name[0] == '\0') {
        return 0; /* the parent table: its own fields are UCX's */
    }

    snprintf(name, sizeof(name), "UCX_%s%s", entry->prefix, table[pick].name);
    value = strndup((const char*)data + 1, size - 1);
    setenv(name, value, 1);

    opts = calloc(1, entry->size);
    if (uct_syncmem_config_fill(opts, entry) == UCS_OK) {
        ucs_config_parser_release_opts(opts, table);
    }
    free(opts);
    unsetenv(name);
    free(value);
    return 0;
}
