/**
 * GraphiQL, served at GET /graphql to a browser (see routes/graphql.ts). The page loads
 * GraphiQL, React and the graphql-ws client from unpkg.com in the browser, pinned; the sandbox
 * serves only this page. Queries go over POST /graphql, subscriptions over its WebSocket.
 */
export const GRAPHIQL_HTML = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>agentctl sandbox · GraphiQL</title>
  <meta name="robots" content="noindex">
  <style>body { margin: 0; } #graphiql { height: 100vh; }</style>
  <link rel="stylesheet" href="https://unpkg.com/graphiql@3.8.3/graphiql.min.css" crossorigin="anonymous">
</head>
<body>
  <div id="graphiql">Loading GraphiQL from unpkg.com…</div>
  <script src="https://unpkg.com/react@18.3.1/umd/react.production.min.js" crossorigin="anonymous"></script>
  <script src="https://unpkg.com/react-dom@18.3.1/umd/react-dom.production.min.js" crossorigin="anonymous"></script>
  <script src="https://unpkg.com/graphql-ws@5.16.2/umd/graphql-ws.min.js" crossorigin="anonymous"></script>
  <script src="https://unpkg.com/graphiql@3.8.3/graphiql.min.js" crossorigin="anonymous"></script>
  <script>
    const url = location.origin + '/graphql';
    const subscriptionUrl = url.replace(/^http/, 'ws');
    const fetcher = GraphiQL.createFetcher({
      url,
      subscriptionUrl,
      wsClient: graphqlWs.createClient({ url: subscriptionUrl }),
    });
    const defaultQuery = '# The sandbox\\'s data API. Try a subscription too:\\n#   subscription { transactionCreated { hash type amount user timestamp } }\\n{\\n  vaults(orderBy: TVL_DESC) {\\n    name\\n    tvl\\n    apy { current day7 }\\n    strategies { name allocation }\\n  }\\n}\\n';
    ReactDOM.createRoot(document.getElementById('graphiql')).render(
      React.createElement(GraphiQL, { fetcher, defaultQuery }),
    );
  </script>
</body>
</html>
`;
