/*
 * cmd_chat.c - `infer chat`: interactive chat with a model.
 *
 * Generation arrives with the forward-pass issue; for now this validates the
 * model and says so plainly.
 */
#include "cli.h"

#include <string.h>

int cmd_chat(int argc, char **argv)
{
    const char *m = NULL;
    for (int i = 1; i < argc - 1; i++)
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model"))
            m = argv[i + 1];
    const char *path = cli_model_path(m);
    if (!path)
        return 1;
    infer_gguf *g;
    if (infer_gguf_open(&g, path, 0) != INFER_OK)
        return cli_fail(NULL);
    infer_residency r;
    infer_gguf_residency(g, &r);
    fprintf(stderr, "loaded %s (%s, %.1f%% resident, %.3f ms)\n", path,
            infer_gguf_get_str(g, "general.architecture", "?"), r.percent, infer_gguf_load_seconds(g) * 1e3);
    fprintf(stderr, "infer chat: text generation is not implemented yet (see README, 'Status')\n");
    infer_gguf_close(g);
    return 1;
}
