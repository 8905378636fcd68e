// The JS SDK checks against any endpoint: `IFMATCH_SDK_CONNECTION=... node --test
// test/sdk-against.mjs` (scripts/sdk-vs-azurite runs it against Azurite and ifmatch).
import { jsPatterns } from "./sdk.mjs";

const connection = process.env.IFMATCH_SDK_CONNECTION;
if (!connection) throw new Error("set IFMATCH_SDK_CONNECTION to a connection string");
jsPatterns(() => connection);
