/**
 * @rx/mcp: Model Context Protocol servers as rx tools. `Servers` says which servers a run uses
 * (`NAME=COMMAND LINE` or `NAME=URL`); `McpTools` starts or reaches them and makes their tools.
 */
export * as McpTools from "./McpTools.js"
export * as Servers from "./Servers.js"
