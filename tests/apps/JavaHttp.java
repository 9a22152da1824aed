// The JDK's own HTTP server (com.sun.net.httpserver: NIO, a Selector for
// idle connections) and clients (java.net.http.HttpClient, and blocking
// java.net.Socket requests with "Connection: close"), for java_http_test.sh.
//   java JavaHttp server PORT
//   java JavaHttp client PORT REQUESTS SOCKETS
// The client posts REQUESTS bodies of varying sizes over one keepalive
// HttpClient, each answered by a body of another size whose bytes it checks,
// then makes SOCKETS blocking connections that each read one answer to the
// end. Prints "http ok=.. bad=..", "socket ok=.. bad=..", a line per error.
import com.sun.net.httpserver.HttpServer;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.Random;
import java.util.concurrent.Executors;

public class JavaHttp {
  static byte byteAt(int i) { return (byte) ((i * 7 + 3) & 255); }

  static String digest(byte[] b) throws Exception {
    return b.length + ":" + Base64.getEncoder().encodeToString(MessageDigest.getInstance("SHA-256").digest(b));
  }

  static boolean answerIntact(byte[] body, int size) {
    if (body.length != size) return false;
    for (int i = 0; i < size; i++)
      if (body[i] != byteAt(i)) return false;
    return true;
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[1]);
    if (args[0].equals("server")) {
      HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 128);
      server.setExecutor(Executors.newFixedThreadPool(4));
      server.createContext("/", ex -> {
        byte[] in = ex.getRequestBody().readAllBytes();
        int size = Integer.parseInt(ex.getRequestHeaders().getFirst("x-size"));
        byte[] out = new byte[size];
        for (int i = 0; i < size; i++) out[i] = byteAt(i);
        try {
          ex.getResponseHeaders().add("x-got", digest(in));
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
        ex.sendResponseHeaders(200, size == 0 ? -1 : size);
        try (OutputStream o = ex.getResponseBody()) {
          o.write(out);
        }
      });
      server.start();
      return;
    }
    int requests = Integer.parseInt(args[2]), sockets = Integer.parseInt(args[3]);
    HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    Random random = new Random(1);
    int ok = 0, bad = 0;
    for (int k = 0; k < requests; k++) {
      int size = (k * 7919) % 300000;
      byte[] up = new byte[(k * 104729) % 200000];
      random.nextBytes(up);
      HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/"))
                                .header("x-size", Integer.toString(size))
                                .POST(HttpRequest.BodyPublishers.ofByteArray(up))
                                .build();
      try {
        HttpResponse<byte[]> res = client.send(request, HttpResponse.BodyHandlers.ofByteArray());
        if (answerIntact(res.body(), size) && digest(up).equals(res.headers().firstValue("x-got").orElse(""))) ok++;
        else bad++;
      } catch (Exception e) {
        System.out.println("http error " + e);
        bad++;
      }
    }
    System.out.println("http ok=" + ok + " bad=" + bad);
    ok = bad = 0;
    for (int k = 0; k < sockets; k++) {
      int size = 1000 + k * 37;
      try (Socket s = new Socket("127.0.0.1", port)) {
        String req = "GET / HTTP/1.1\r\nHost: x\r\nx-size: " + size + "\r\nConnection: close\r\n\r\n";
        s.getOutputStream().write(req.getBytes(StandardCharsets.US_ASCII));
        byte[] all = s.getInputStream().readAllBytes();
        int head = new String(all, StandardCharsets.ISO_8859_1).indexOf("\r\n\r\n") + 4;
        byte[] body = java.util.Arrays.copyOfRange(all, Math.max(head, 0), all.length);
        if (head >= 4 && answerIntact(body, size)) ok++;
        else bad++;
      } catch (Exception e) {
        System.out.println("socket error " + e);
        bad++;
      }
    }
    System.out.println("socket ok=" + ok + " bad=" + bad);
  }
}
