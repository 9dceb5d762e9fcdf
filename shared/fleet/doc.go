// Package fleet is an app's view of its agents as a whole: the fleet list
// (GET /api/remote_agents, a page of the tenant's agents, newest first, with
// filters) and kill (POST /api/remote_agents/{id}/kill, an agent ended at
// once with no grace), over the session store's roles it needs.
package fleet
