-- roost from Neovim, through the public msgpack-RPC protocol only.
--
--   :luafile contrib/clients/roost.lua
--   :lua Roost.dispatch("list the files here and count them", {model = "scripted/demo"})
--
-- Neovim answers incoming notifications by calling its own API, so this client does not
-- attach to the event stream: it starts the run with `dispatch` and polls `events` (stored
-- events after the last seq it has seen) until the run has finished. In agent mode, writes
-- and shell commands wait for approval: M.run asks with confirm() and answers with
-- `permission.respond` (any other terminal may answer first).

local M = {}

-- The daemon's socket: ROOST_SOCKET, else the runtime dir, else the per-user temp folder.
function M.socket()
  local explicit = os.getenv("ROOST_SOCKET")
  if explicit and explicit ~= "" then
    return explicit
  end
  local runtime = os.getenv("XDG_RUNTIME_DIR")
  if runtime and runtime ~= "" then
    return runtime .. "/roost/roost.sock"
  end
  local uid = vim.trim(vim.fn.system("id -u"))
  return (os.getenv("TMPDIR") or "/tmp") .. "/roost-" .. uid .. "/roost.sock"
end

function M.connect()
  return vim.fn.sockconnect("pipe", M.socket(), { rpc = true })
end

-- Start a run; returns {session = ..., run = ...}.
function M.dispatch(task, opts)
  local channel = M.connect()
  local params = vim.tbl_extend("force", { task = task, cwd = vim.fn.getcwd() }, opts or {})
  local started = vim.fn.rpcrequest(channel, "dispatch", params)
  vim.fn.chanclose(channel)
  return started
end

-- Answer a permission request: decision "approve" or "deny", scope "once" or "session".
function M.respond(session, call_id, decision, scope)
  local channel = M.connect()
  local ok, err = pcall(vim.fn.rpcrequest, channel, "permission.respond",
    { session = session, call_id = call_id, decision = decision, scope = scope or "once" })
  vim.fn.chanclose(channel)
  return ok, err
end

-- Wait (polling every `interval` ms, up to `timeout` ms) for the run to finish; returns its
-- run.finished event, or nil on timeout. `on_event` sees every stored event in order.
function M.wait(started, on_event, timeout, interval)
  local channel = M.connect()
  local since, finished = 0, nil
  vim.wait(timeout or 60000, function()
    local page = vim.fn.rpcrequest(channel, "events", { session = started.session, since = since })
    for _, event in ipairs(page.events) do
      since = event.seq
      if on_event then
        on_event(event)
      end
      if event.type == "run.finished" and event.run == started.run then
        finished = event
      end
    end
    return finished ~= nil
  end, interval or 50)
  vim.fn.chanclose(channel)
  return finished
end

-- Dispatch and show the run's tool calls and final text in the message area.
function M.run(task, opts)
  local started = M.dispatch(task, opts)
  local finished = M.wait(started, function(event)
    if event.type == "tool.started" then
      vim.api.nvim_echo({ { "roost → " .. event.name .. " " .. vim.fn.json_encode(event.input) } }, true, {})
    elseif event.type == "permission.requested" then
      local what = event.tool .. " " .. vim.fn.json_encode(event.input)
      local choice = vim.fn.confirm("roost: allow " .. what .. "?", "&Yes\n&Session\n&No", 3)
      local decision = (choice == 1 or choice == 2) and "approve" or "deny"
      M.respond(started.session, event.call_id, decision, choice == 2 and "session" or "once")
    end
  end)
  if finished then
    vim.api.nvim_echo({ { "roost ■ " .. finished.reason .. ": " .. finished.text } }, true, {})
  end
  return finished
end

Roost = M
return M
