// A real OpenID provider on loopback for the single sign-on tests: the OpenID-certified `oidc-provider` package, with
// its own development login and consent pages, driven over HTTP by tests/fakes/oidc_provider.py.
//
// Started as `node oidc_provider.mjs CONFIG.json`; CONFIG holds {issuer, port, client, jwks}: the keys are made by the
// tests, so that they can sign hostile ID tokens with the provider's own key. Prints `listening` once it serves.
//
// Beside the provider, three test controls under /__control/ (never part of the provider's own routes):
//   PUT /__control/accounts/SUB   the claims of the person who signs in as SUB (email, groups, ...)
//   PUT /__control/keys           a new signing key set: the provider rotates to it at once, as a real one would
//   PUT /__control/next-id-token  {"id_token": ...}: the next token response carries this ID token instead of its own
import { readFileSync } from 'node:fs';
import http from 'node:http';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const accounts = new Map();
let nextIdToken = null;

function makeProvider(jwks) {
  const provider = new Provider(config.issuer, {
    clients: [config.client],
    jwks,
    findAccount(ctx, sub) {
      const claims = accounts.get(sub);
      return claims && { accountId: sub, claims: () => ({ ...claims, sub }) };
    },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username'],
      groups: ['groups'],
    },
    // The claims of the scopes asked for go in the ID token too (Tollgate reads the person from it).
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    cookies: { keys: ['test-cookie-key'] },
    features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  });
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === '/token' && nextIdToken && ctx.body?.id_token) {
      ctx.body = { ...ctx.body, id_token: nextIdToken };
      nextIdToken = null;
    }
  });
  return provider;
}

let provider = makeProvider(config.jwks);

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function control(req, res) {
  const body = await readJson(req);
  const path = req.url.slice('/__control/'.length);
  if (path.startsWith('accounts/')) {
    accounts.set(decodeURIComponent(path.slice('accounts/'.length)), body);
  } else if (path === 'keys') {
    provider = makeProvider(body);
  } else if (path === 'next-id-token') {
    nextIdToken = body.id_token;
  } else {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(204).end();
}

const server = http.createServer((req, res) => {
  if (req.method === 'PUT' && req.url.startsWith('/__control/')) {
    control(req, res).catch((error) => res.writeHead(400).end(String(error)));
    return;
  }
  provider.callback()(req, res);
});
server.listen(config.port, '127.0.0.1', () => console.log('listening'));
