-- contrib/haproxy/infer_key.lua - the routing key for `balance hash lua.infer_key`
-- (contrib/haproxy/infer.cfg): requests that share a prompt prefix go to the same board, so
-- its prefix cache answers them warm.
--
-- The key, first found wins:
--   1. the request's "prompt_cache_key" (OpenAI's routing hint),
--   2. the X-Session-Id header,
--   3. the first 512 bytes of the first message's text ("messages": the system prompt),
--   4. the first 512 bytes of "system" (Ollama /api/generate), else of "prompt".
--   5. nothing: an empty key (HAProxy then hashes an empty sample: one board for all such
--      requests, GET /v1/models and the like).
--
-- The body is scanned as text, not parsed: HAProxy hands Lua only what fits in its buffer
-- (tune.bufsize, 16 KiB by default) when the body is larger, and a JSON parser would fail on the
-- cut (HAProxy's json_query does, and the balancer silently falls back to round-robin).  The
-- scanner needs only the start of the body, which holds the system prompt.  Strings are taken
-- as sent (escapes included): a client that sends the same prompt the same way gets the same
-- board.  "prompt_cache_key" is only seen when it is inside the buffered part: put it first, or
-- send X-Session-Id, when bodies are large.

local PREFIX = 512

-- The JSON string starting at the quote at position q of s: its raw bytes (escapes kept), up to
-- `limit` bytes; stops at the end of s when the body was cut.
local function json_string(s, q, limit)
    local out, i, n = {}, q + 1, 0
    while i <= #s and n < limit do
        local c = string.sub(s, i, i)
        if c == '"' then break end
        if c == "\\" then
            out[#out + 1] = string.sub(s, i, i + 1)
            i = i + 2
            n = n + 2
        else
            out[#out + 1] = c
            i = i + 1
            n = n + 1
        end
    end
    return table.concat(out)
end

-- The value of the first key `name` whose value is a string, searching from `from`.
local function string_field(s, name, from)
    local pat = '"' .. name .. '"%s*:%s*"'
    local a, b = string.find(s, pat, from or 1)
    if not a then return nil end
    return json_string(s, b, PREFIX)
end

local function key_of(body, session)
    local k = string_field(body, "prompt_cache_key")
    if k and k ~= "" then return "k:" .. k end
    if session and session ~= "" then return "s:" .. session end
    local _, m = string.find(body, '"messages"%s*:%s*%[')
    if m then
        -- the first message's text: "content" as a string, or the first "text" part of it
        local c = string.find(body, '"content"%s*:', m)
        if c then
            local _, v = string.find(body, '"content"%s*:%s*', c)
            local first = string.sub(body, v + 1, v + 1)
            if first == '"' then return "m:" .. json_string(body, v + 1, PREFIX) end
            local t = string_field(body, "text", v + 1)
            if t then return "m:" .. t end
        end
    end
    k = string_field(body, "system")
    if k then return "y:" .. k end
    k = string_field(body, "prompt")
    if k then return "p:" .. k end
    return ""
end

core.register_fetches("infer_key", function(txn)
    local body = txn.f:req_body() or ""
    local session = txn.f:req_hdr("x-session-id")
    return key_of(body, session)
end)
