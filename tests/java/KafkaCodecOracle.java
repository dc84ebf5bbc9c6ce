// Apache Kafka's own generated message classes as a codec oracle for kproto's tests.
//
// One long-lived process: it reads one JSON document per line on stdin and answers one JSON document per
// line on stdout.  A request is {"cases": [case, ...]} and its answer {"results": [result, ...]}, in order,
// so that thousands of comparisons cost one round trip.  {"op": "list"} answers the (api key, direction,
// lowest, highest version) of every message the jar's ApiMessageType knows.
//
// A case is {"op": OP, "key": api key, "version": v, "dir": "request" | "response", ...}:
//   "read"    "data": base64 body -> Kafka's read() of it; the result holds "rest" (bytes left unread),
//             "json" (the *JsonConverter form) and "bytes" (Kafka's write() of what it read, base64),
//             or "write_error" where the writer refuses what the reader accepted.
//   "json"    "json": a document in Kafka's JSON form -> *JsonConverter.read(), then "bytes" and "json"
//             as above: Kafka's own encoding of a message built from JSON.
//   "default" the message as Kafka constructs it (every field at its default): "bytes" and "json".
// A case that Kafka refuses answers {"error": "ExceptionClass: message"}.  Nothing here knows any api:
// classes are found through ApiMessageType and, for JSON, by the generator's naming
// (org.apache.kafka.common.message.<Data class>JsonConverter).

import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;

public final class KafkaCodecOracle {
    // Non-finite float64 values travel as the bare tokens Infinity and -Infinity (Python's json writes them).
    private static final ObjectMapper MAPPER =
        JsonMapper.builder().enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();
    private static final Map<Class<?>, Method[]> CONVERTERS = new HashMap<>();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            JsonNode request = MAPPER.readTree(line);
            ObjectNode answer = MAPPER.createObjectNode();
            if (request.has("op") && "list".equals(request.get("op").asText())) {
                answer.set("messages", list());
            } else {
                ArrayNode results = answer.putArray("results");
                for (JsonNode c : request.get("cases")) {
                    results.add(run(c));
                }
            }
            out.println(MAPPER.writeValueAsString(answer));
            out.flush();
        }
    }

    private static ArrayNode list() {
        ArrayNode all = MAPPER.createArrayNode();
        for (ApiMessageType type : ApiMessageType.values()) {
            for (String dir : new String[] {"request", "response"}) {
                ApiMessage m;
                try {
                    m = create(type, dir);
                } catch (RuntimeException e) {
                    // An api key the enum still names but whose classes this release removed.
                    continue;
                }
                ObjectNode entry = all.addObject();
                entry.put("key", type.apiKey());
                entry.put("dir", dir);
                entry.put("class", m.getClass().getSimpleName());
                entry.put("lowest", m.lowestSupportedVersion());
                entry.put("highest", m.highestSupportedVersion());
            }
        }
        return all;
    }

    private static ApiMessage create(ApiMessageType type, String dir) {
        return "request".equals(dir) ? type.newRequest() : type.newResponse();
    }

    private static ObjectNode run(JsonNode c) {
        ObjectNode result = MAPPER.createObjectNode();
        try {
            String op = c.get("op").asText();
            short version = (short) c.get("version").asInt();
            ApiMessage m = create(ApiMessageType.fromApiKey((short) c.get("key").asInt()), c.get("dir").asText());
            if ("read".equals(op)) {
                ByteBuffer buf = ByteBuffer.wrap(Base64.getDecoder().decode(c.get("data").asText()));
                m.read(new ByteBufferAccessor(buf), version);
                result.put("rest", buf.remaining());
            } else if ("json".equals(op)) {
                m = (ApiMessage) converter(m.getClass())[0].invoke(null, c.get("json"), version);
            } else if (!"default".equals(op)) {
                throw new IllegalArgumentException("unknown op " + op);
            }
            result.set("json", (JsonNode) converter(m.getClass())[1].invoke(null, m, version));
            // A reader can accept what the writer then refuses (repeated unknown tags): said apart.
            try {
                ObjectSerializationCache cache = new ObjectSerializationCache();
                ByteBuffer written = ByteBuffer.allocate(m.size(cache, version));
                m.write(new ByteBufferAccessor(written), cache, version);
                if (written.hasRemaining()) {
                    throw new IllegalStateException("write() left " + written.remaining() + " bytes of size() unwritten");
                }
                result.put("bytes", Base64.getEncoder().encodeToString(written.array()));
            } catch (RuntimeException e) {
                result.put("write_error", e.getClass().getName() + ": " + e.getMessage());
            }
        } catch (Throwable e) {
            Throwable cause = e instanceof InvocationTargetException ? e.getCause() : e;
            result.removeAll();
            result.put("error", cause.getClass().getName() + ": " + cause.getMessage());
        }
        return result;
    }

    // {read(JsonNode, short), write(Data, short)} of the generated JSON converter of a message class.
    private static Method[] converter(Class<?> data) throws ReflectiveOperationException {
        Method[] found = CONVERTERS.get(data);
        if (found == null) {
            Class<?> conv = Class.forName(data.getName() + "JsonConverter");
            found = new Method[] {conv.getMethod("read", JsonNode.class, short.class),
                                  conv.getMethod("write", data, short.class)};
            CONVERTERS.put(data, found);
        }
        return found;
    }
}
