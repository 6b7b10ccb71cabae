/**
 * @rx/mcp: Model Context Protocol servers as rx tools. `Servers` says which servers a run uses
 * (`NAME=COMMAND LINE` or `NAME=URL`), `Flags` reads them from a command line and a config file,
 * and `McpTools` starts or reaches them and makes their tools.
 */
export * as Flags from "./Flags.js"
export * as McpTools from "./McpTools.js"
export * as Servers from "./Servers.js"
