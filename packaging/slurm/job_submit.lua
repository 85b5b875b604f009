--[[
job_submit.lua for ofcd (Slurm's job_submit/lua): refuses at submission a job
that asks for more nodes than one fabric can join on this cluster, with the
reason, instead of letting it wait for nodes and fail its prolog. The limit is
what `ofcd-slurm gc` last wrote (OFCD_STATE_DIR/max_nodes: the planner's
answer for the servers with the most devices). Jobs that get no fabric (ofcd=off
in their comment, or OFCD_JOBS=none without ofcd=on), and any job while the
limit is unknown, pass. A heterogeneous job is judged a component at a time,
as Slurm submits it: its prolog refuses one whose components together are too
many. Settings are read at each submission. Install it as
job_submit.lua next to slurm.conf (or call ofcd_check() from your own), with
JobSubmitPlugins=lua.
]]

local settings = "@SYSCONFDIR@/ofcd/slurm/ofcd-slurm.conf"

-- A setting of ofcd-slurm.conf (KEY=VALUE lines), or default.
local function setting(key, default)
	local f = io.open(settings, "r")
	if not f then
		return default
	end
	local value = default
	for line in f:lines() do
		local v = line:match("^%s*" .. key .. "=(.*)$")
		if v then
			value = v:gsub("^%s*[\"']?", ""):gsub("[\"']?%s*$", "")
		end
	end
	f:close()
	return value
end

local function max_nodes()
	local f = io.open(setting("OFCD_STATE_DIR", "/var/lib/ofcd-slurm") .. "/max_nodes", "r")
	if not f then
		return nil
	end
	local n = tonumber(f:read("*l"))
	f:close()
	return n
end

-- Whether comment says word, as the prolog reads it (ofcd-slurm wants_fabric()): a
-- word between spaces, commas or semicolons, so that ofcd=one is not ofcd=on.
local function says(comment, word)
	for w in comment:gmatch("[^%s,;]+") do
		if w == word then
			return true
		end
	end
	return false
end

-- slurm.SUCCESS, or slurm.ERROR after telling the user why.
function ofcd_check(job_desc)
	local n = job_desc.min_nodes
	-- Unset (NO_VAL and above): Slurm's default of one node.
	if n == nil or n >= 0xfffffffe then
		return slurm.SUCCESS
	end
	local comment = job_desc.comment or ""
	if says(comment, "ofcd=off") then
		return slurm.SUCCESS
	end
	-- The prolog's rule (ofcd-slurm wants_fabric()): with none, only ofcd=on gets one.
	if setting("OFCD_JOBS", "multi-node") == "none" and not says(comment, "ofcd=on") then
		return slurm.SUCCESS
	end
	local max = max_nodes()
	if max and n > max then
		slurm.log_user("ofcd: no fabric joins %d nodes on this cluster (at most %d: each node " ..
		               "has too few optical ports for more); ask for fewer nodes, or " ..
		               "--comment ofcd=off to run without one", n, max)
		return slurm.ERROR
	end
	return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	return ofcd_check(job_desc)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end
