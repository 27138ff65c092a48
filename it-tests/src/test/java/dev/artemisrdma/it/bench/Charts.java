package dev.artemisrdma.it.bench;

import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.BitmapEncoder.BitmapFormat;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.internal.chartpart.Chart;
import org.knowm.xchart.style.AxesChartStyler;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

import java.awt.Color;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Draws the PNG charts of a benchmark's results folder, from the machine-readable figures the benchmarks write:
 * {@code rdmaperf-summary.csv} (rdmaperf-bench: message rate, latency and CPU per message by size, RdmaPerf
 * against perftest) and {@code artemis-summary.csv} with its {@code artemis-latency-*.hgrm} distributions
 * (artemis-bench: throughput, latency percentiles and CPU per message, RDMA against Netty TCP). Writes the PNGs
 * next to them. Usage: {@code Charts DIR...}; the scripts call it after each run, {@code it-tests/bench/charts}
 * draws a folder again.
 */
public final class Charts {

    static final String RDMAPERF_SUMMARY = "rdmaperf-summary.csv";
    static final String ARTEMIS_SUMMARY = "artemis-summary.csv";
    static final String ARTEMIS_HOST_SUMMARY = "artemis-host-summary.csv";
    static final String MEASURED_ON = "measured-on.txt";
    private static final int WIDTH = 800;
    private static final int HEIGHT = 480;
    private static final Color TCP = new Color(0x99, 0x99, 0x99);
    private static final Color RDMA = new Color(0xd9, 0x5f, 0x02);
    private static final Color PERFTEST = new Color(0x55, 0x55, 0x55);
    private static final Color VERBS = new Color(0x1b, 0x9e, 0x77);

    private Charts() {
    }

    public static void main(String[] args) throws IOException {
        System.setProperty("java.awt.headless", "true");
        if (args.length == 0) {
            System.err.println("usage: Charts DIR... (a results folder of rdmaperf-bench or artemis-bench)");
            System.exit(2);
        }
        int drawn = 0;
        for (String arg : args) {
            Path dir = Path.of(arg);
            List<Path> written = draw(dir);
            if (written.isEmpty()) {
                System.err.println("charts: " + dir + " holds neither " + RDMAPERF_SUMMARY + " nor " + ARTEMIS_SUMMARY
                        + ": run it-tests/bench/rdmaperf-bench or artemis-bench first");
            }
            written.forEach(p -> System.out.println("charts: wrote " + p));
            drawn += written.size();
        }
        System.exit(drawn > 0 ? 0 : 1);
    }

    /** Draws every chart whose figures the folder holds; returns the PNGs written. */
    static List<Path> draw(Path dir) throws IOException {
        List<Path> written = new ArrayList<>();
        Path rdmaperf = dir.resolve(RDMAPERF_SUMMARY);
        if (Files.isRegularFile(rdmaperf)) {
            written.addAll(rdmaperf(dir, Table.read(rdmaperf), date(rdmaperf)));
        }
        Path host = dir.resolve(ARTEMIS_HOST_SUMMARY);
        if (Files.isRegularFile(host)) {
            written.addAll(artemisHost(dir, Table.read(host), date(host)));
        }
        Path artemis = dir.resolve(ARTEMIS_SUMMARY);
        if (Files.isRegularFile(artemis)) {
            written.addAll(artemis(dir, Table.read(artemis), date(artemis)));
        }
        return written;
    }

    /** The day the figures were measured: measured-on.txt, which the benchmarks write, else the file's date. */
    private static String date(Path file) throws IOException {
        Path measuredOn = file.resolveSibling(MEASURED_ON);
        if (Files.isRegularFile(measuredOn)) {
            String day = Files.readString(measuredOn).trim();
            if (!day.isEmpty()) {
                return day;
            }
        }
        return LocalDate.ofInstant(Files.getLastModifiedTime(file).toInstant(), ZoneOffset.UTC).toString();
    }

    // ---------------------------------------------------------------- rdmaperf-bench

    private static final String[] BW_TOOLS = {"ib_send_bw", "verbs", "transport"};
    private static final String[] LAT_TOOLS = {"ib_send_lat", "verbs", "transport"};

    private static List<Path> rdmaperf(Path dir, Table t, String date) throws IOException {
        List<Path> written = new ArrayList<>();
        if (!t.select("mode", "bw").isEmpty()) {
            written.add(save(bySize(t, "bw", "msgs_per_s", BW_TOOLS, "Message rate by size, one stream (lab, " + date
                    + ")", "messages per second (log)"), dir, "rdmaperf-message-rate"));
            written.add(save(bySize(t, "bw", "cpu_us_per_msg", BW_TOOLS, "CPU per message streamed, both ends (lab, "
                    + date + ")", "CPU microseconds per message (log)"), dir, "rdmaperf-cpu-per-message"));
        }
        if (!t.select("mode", "lat").isEmpty()) {
            written.add(save(bySize(t, "lat", "p50_us", LAT_TOOLS, "One-way latency by size, median (lab, " + date
                    + ")", "microseconds (log)"), dir, "rdmaperf-latency"));
        }
        return written;
    }

    /** Bars per message size, one series per tool, the perftest baseline first. */
    private static CategoryChart bySize(Table t, String mode, String metric, String[] tools, String title,
                                        String yTitle) {
        CategoryChart chart = new CategoryChartBuilder().width(WIDTH).height(HEIGHT).title(title)
                .xAxisTitle("message size").yAxisTitle(yTitle).build();
        style(chart.getStyler());
        chart.getStyler().setYAxisLogarithmic(true);
        chart.getStyler().setLabelsVisible(true).setLabelsRotation(0).setLabelsPosition(0.9);
        chart.getStyler().setYAxisMin(decadeBelow(t.select("mode", mode, "metric", metric)));
        chart.getStyler().setYAxisDecimalPattern("#,##0.#");
        chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideS);
        List<Map<String, String>> rows = t.select("mode", mode, "metric", metric);
        Set<String> sizes = new LinkedHashSet<>();
        rows.forEach(r -> sizes.add(r.get("size")));
        Color[] colors = {PERFTEST, VERBS, RDMA};
        for (int i = 0; i < tools.length; i++) {
            List<String> x = new ArrayList<>();
            List<Double> y = new ArrayList<>();
            for (String size : sizes) {
                Double value = t.number(t.select("mode", mode, "metric", metric, "tool", tools[i], "size", size));
                if (value != null && value > 0) {
                    x.add(sizeLabel(size));
                    y.add(value);
                }
            }
            if (!x.isEmpty()) {
                String name = tools[i].startsWith("ib_") ? tools[i] : "RdmaPerf " + tools[i];
                chart.addSeries(name, x, y).setFillColor(colors[i]);
            }
        }
        return chart;
    }

    /** Bars on a log axis need a floor above zero: the power of ten below the smallest value. */
    private static double decadeBelow(List<Map<String, String>> rows) {
        double min = Double.MAX_VALUE;
        for (Map<String, String> row : rows) {
            try {
                double v = Double.parseDouble(row.get("value"));
                if (v > 0) {
                    min = Math.min(min, v);
                }
            } catch (NumberFormatException e) {
                // not measured
            }
        }
        // half the smallest value, so that its bar still shows
        return min == Double.MAX_VALUE ? 1 : Math.pow(10, Math.floor(Math.log10(min / 2)));
    }

    private static String sizeLabel(String bytes) {
        long n = Long.parseLong(bytes);
        if (n >= 1024 && n % 1024 == 0) {
            return n / 1024 + " KiB";
        }
        return n + " B";
    }

    // ---------------------------------------------------------------- artemis-bench

    private static List<Path> artemis(Path dir, Table t, String date) throws IOException {
        List<Path> written = new ArrayList<>();
        List<String> scenarios = new ArrayList<>();
        Map<String, Map<String, String>[]> byScenario = new LinkedHashMap<>();
        for (Map<String, String> row : t.rows) {
            String key = row.get("delivery") + "-" + row.get("pairs");
            if (!byScenario.containsKey(key)) {
                scenarios.add(key);
                @SuppressWarnings("unchecked")
                Map<String, String>[] pair = new Map[2];
                byScenario.put(key, pair);
            }
            byScenario.get(key)[row.get("transport").equals("tcp") ? 0 : 1] = row;
        }
        written.add(save(artemisBars(scenarios, byScenario, "msgs_per_s", "JMS throughput, 1 KiB messages, all-out "
                + "(lab, " + date + ")", "messages per second"), dir, "artemis-throughput"));
        written.add(save(artemisBars(scenarios, byScenario, "cpu_us_per_msg", "CPU per message, broker and clients "
                + "(lab, " + date + ")", "CPU microseconds per message"), dir, "artemis-cpu-per-message"));
        List<XYChart> panels = new ArrayList<>();
        for (String scenario : scenarios) {
            Map<String, String> tcp = byScenario.get(scenario)[0];
            panels.add(percentiles(dir, scenario, tcp == null ? "?" : tcp.get("rate"), date));
        }
        int columns = panels.size() == 1 ? 1 : 2;
        int rows = (panels.size() + columns - 1) / columns;
        Path file = dir.resolve("artemis-latency-percentiles.png");
        BitmapEncoder.saveBitmap(new ArrayList<>(panels), rows, columns, file.toString(), BitmapFormat.PNG);
        written.add(file);
        return written;
    }

    // ---------------------------------------------------------------- artemis-host-bench

    private static final String[] HOST_TRANSPORTS = {"invm", "rdma", "tcp"};
    private static final String[] HOST_NAMES = {"in-VM (the floor)", "RDMA, in-memory fabric", "Netty TCP, loopback"};
    private static final Color INVM = new Color(0x1b, 0x9e, 0x77);

    private static Color hostColor(int i) {
        return i == 0 ? INVM : i == 1 ? RDMA : TCP;
    }

    private static List<Path> artemisHost(Path dir, Table t, String date) throws IOException {
        List<Path> written = new ArrayList<>();
        List<String> scenarios = new ArrayList<>();
        Map<String, Map<String, Map<String, String>>> rows = new LinkedHashMap<>();
        for (Map<String, String> row : t.rows) {
            String key = row.get("delivery") + "-" + row.get("pairs");
            if (!rows.containsKey(key)) {
                scenarios.add(key);
                rows.put(key, new LinkedHashMap<>());
            }
            rows.get(key).put(row.get("transport"), row);
        }
        written.add(save(hostBars(scenarios, rows, "msgs_per_s", "JMS throughput, 1 KiB, all-out, one JVM on the host ("
                + date + ")", "messages per second"), dir, "artemis-host-throughput"));
        written.add(save(hostBars(scenarios, rows, "cpu_us_per_msg", "CPU per message, broker and clients in one JVM "
                + "(host, " + date + ")", "CPU microseconds per message"), dir, "artemis-host-cpu-per-message"));
        List<XYChart> panels = new ArrayList<>();
        for (String scenario : scenarios) {
            Map<String, String> any = rows.get(scenario).values().iterator().next();
            XYChart chart = new XYChartBuilder().width(WIDTH).height(HEIGHT).title("Latency, " + scenarioLabel(scenario)
                    + ", " + any.get("rate") + " msg/s (host, " + date + ")").xAxisTitle("percentile")
                    .yAxisTitle("send to receive, ms (log)").build();
            style(chart.getStyler());
            chart.getStyler().setYAxisLogarithmic(true).setYAxisLogarithmicDecadeOnly(false);
            chart.getStyler().setYAxisDecimalPattern("#,##0.###");
            chart.getStyler().setxAxisTickLabelsFormattingFunction(Charts::percentileLabel);
            chart.getStyler().setXAxisMin(0.0);
            chart.getStyler().setLegendPosition(Styler.LegendPosition.InsideNW);
            chart.getStyler().setMarkerSize(0);
            for (int i = 0; i < HOST_TRANSPORTS.length; i++) {
                Path hgrm = dir.resolve("artemis-host-latency-" + scenario + "-" + HOST_TRANSPORTS[i] + ".hgrm");
                if (!Files.isRegularFile(hgrm)) {
                    continue;
                }
                double[][] xy = readPercentiles(hgrm);
                XYSeries s = chart.addSeries(HOST_NAMES[i], xy[0], xy[1]);
                s.setMarker(SeriesMarkers.NONE);
                s.setLineColor(hostColor(i));
                s.setLineWidth(2.5f);
            }
            panels.add(chart);
        }
        int columns = panels.size() == 1 ? 1 : 2;
        int rowCount = (panels.size() + columns - 1) / columns;
        Path file = dir.resolve("artemis-host-latency-percentiles.png");
        BitmapEncoder.saveBitmap(new ArrayList<>(panels), rowCount, columns, file.toString(), BitmapFormat.PNG);
        written.add(file);
        return written;
    }

    /** Bars per scenario, one series per transport; each scenario's label carries RDMA/in-VM. */
    private static CategoryChart hostBars(List<String> scenarios, Map<String, Map<String, Map<String, String>>> rows,
                                          String column, String title, String yTitle) {
        CategoryChart chart = new CategoryChartBuilder().width(1100).height(HEIGHT).title(title)
                .xAxisTitle("scenario: RDMA/in-VM").yAxisTitle(yTitle).build();
        style(chart.getStyler());
        chart.getStyler().setLabelsVisible(true).setLabelsRotation(0).setLabelsPosition(0.9);
        chart.getStyler().setYAxisDecimalPattern("#,##0.#");
        List<String> x = new ArrayList<>();
        List<List<Double>> series = new ArrayList<>();
        for (int i = 0; i < HOST_TRANSPORTS.length; i++) {
            series.add(new ArrayList<>());
        }
        for (String scenario : scenarios) {
            Map<String, Map<String, String>> byTransport = rows.get(scenario);
            double floor = value(byTransport.get("invm"), column);
            double ours = value(byTransport.get("rdma"), column);
            x.add(String.format(Locale.ROOT, "%s: %.2fx", scenarioLabel(scenario), floor == 0 ? 0 : ours / floor));
            for (int i = 0; i < HOST_TRANSPORTS.length; i++) {
                series.get(i).add(value(byTransport.get(HOST_TRANSPORTS[i]), column));
            }
        }
        for (int i = 0; i < HOST_TRANSPORTS.length; i++) {
            chart.addSeries(HOST_NAMES[i], x, series.get(i)).setFillColor(hostColor(i));
        }
        chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideS);
        return chart;
    }

    private static double value(Map<String, String> row, String column) {
        return row == null ? 0 : Double.parseDouble(row.get(column));
    }

    private static String scenarioLabel(String key) {
        String[] parts = key.split("-");
        int pairs = Integer.parseInt(parts[1]);
        return (parts[0].equals("persistent") ? "persistent" : "non-persistent") + ", " + pairs
                + (pairs == 1 ? " pair" : " pairs");
    }

    /** TCP and RDMA bars per scenario; each scenario's label carries the RDMA/TCP ratio. */
    private static CategoryChart artemisBars(List<String> scenarios, Map<String, Map<String, String>[]> byScenario,
                                             String column, String title, String yTitle) {
        CategoryChart chart = new CategoryChartBuilder().width(1100).height(HEIGHT).title(title)
                .xAxisTitle("scenario: RDMA/TCP").yAxisTitle(yTitle).build();
        style(chart.getStyler());
        chart.getStyler().setLabelsVisible(true).setLabelsRotation(0).setLabelsPosition(0.9);
        chart.getStyler().setYAxisDecimalPattern("#,##0.#");
        List<String> x = new ArrayList<>();
        List<Double> tcp = new ArrayList<>();
        List<Double> rdma = new ArrayList<>();
        for (String scenario : scenarios) {
            Map<String, String>[] pair = byScenario.get(scenario);
            if (pair[0] == null || pair[1] == null) {
                continue;
            }
            double t = Double.parseDouble(pair[0].get(column));
            double r = Double.parseDouble(pair[1].get(column));
            x.add(String.format(Locale.ROOT, "%s: %.2fx", scenarioLabel(scenario), t == 0 ? 0 : r / t));
            tcp.add(t);
            rdma.add(r);
        }
        chart.addSeries("Netty TCP", x, tcp).setFillColor(TCP);
        chart.addSeries("RDMA", x, rdma).setFillColor(RDMA);
        chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideS);
        return chart;
    }

    /** HdrHistogram percentile distribution, TCP against RDMA, percentiles on a log scale as HdrHistogram plots. */
    private static XYChart percentiles(Path dir, String scenario, String rate, String date) throws IOException {
        XYChart chart = new XYChartBuilder().width(WIDTH).height(HEIGHT).title("Latency, " + scenarioLabel(scenario)
                + ", " + rate + " msg/s (lab, " + date + ")").xAxisTitle("percentile")
                .yAxisTitle("send to receive, ms (log)").build();
        style(chart.getStyler());
        chart.getStyler().setYAxisLogarithmic(true).setYAxisLogarithmicDecadeOnly(false); // medians and tails apart
        chart.getStyler().setYAxisDecimalPattern("#,##0.##");
        // x = log10(1/(1-p)) on a linear axis (XChart's log axis ignores a label function): whole numbers are the
        // nines, 1 = 90%, 3 = 99.9%
        chart.getStyler().setxAxisTickLabelsFormattingFunction(Charts::percentileLabel);
        chart.getStyler().setXAxisMin(0.0);
        chart.getStyler().setLegendPosition(Styler.LegendPosition.InsideNW);
        chart.getStyler().setMarkerSize(0);
        String[] transports = {"tcp", "rdma"};
        Color[] colors = {TCP, RDMA};
        for (int i = 0; i < transports.length; i++) {
            Path hgrm = dir.resolve("artemis-latency-" + scenario + "-" + transports[i] + ".hgrm");
            if (!Files.isRegularFile(hgrm)) {
                continue;
            }
            double[][] xy = readPercentiles(hgrm);
            XYSeries s = chart.addSeries(transports[i].equals("tcp") ? "Netty TCP" : "RDMA", xy[0], xy[1]);
            s.setMarker(SeriesMarkers.NONE);
            s.setLineColor(colors[i]);
            s.setLineWidth(2.5f);
        }
        return chart;
    }

    /** log10(1/(1-p)) back to a percentile label at whole numbers: 0 = 0%, 1 = 90%, 3 = 99.9%; else none. */
    private static String percentileLabel(Double x) {
        long nines = Math.round(x);
        if (Math.abs(x - nines) > 1e-9 || nines < 0) {
            return "";
        }
        if (nines == 0) {
            return "0%";
        }
        return nines == 1 ? "90%" : "99." + "9".repeat((int) nines - 2) + "%";
    }

    /**
     * HdrHistogram's percentile distribution text (outputPercentileDistribution, values in microseconds): x =
     * log10(1/(1-p)),
     * y = milliseconds. The 100% line (1/(1-p) infinite) is left out.
     */
    static double[][] readPercentiles(Path hgrm) throws IOException {
        List<double[]> points = new ArrayList<>();
        for (String line : Files.readAllLines(hgrm)) {
            String[] f = line.trim().split("\\s+");
            if (f.length != 4 || line.startsWith("#")) {
                continue;
            }
            try {
                double value = Double.parseDouble(f[0]);
                double inverse = Double.parseDouble(f[3]);
                if (Double.isFinite(inverse)) {
                    points.add(new double[] {Math.log10(inverse), value / 1000.0});
                }
            } catch (NumberFormatException e) {
                // the header line
            }
        }
        if (points.isEmpty()) {
            throw new IOException(hgrm + " holds no percentile distribution");
        }
        double[][] xy = new double[2][points.size()];
        for (int i = 0; i < points.size(); i++) {
            xy[0][i] = points.get(i)[0];
            xy[1][i] = points.get(i)[1];
        }
        return xy;
    }

    // ---------------------------------------------------------------- common

    private static void style(AxesChartStyler styler) {
        styler.setChartBackgroundColor(Color.WHITE);
        styler.setPlotBorderVisible(false);
        styler.setLegendBorderColor(Color.WHITE);
        styler.setLegendPosition(Styler.LegendPosition.InsideNE);
        styler.setAntiAlias(true);
    }

    private static Path save(Chart<?, ?> chart, Path dir, String name) throws IOException {
        Path file = dir.resolve(name + ".png");
        BitmapEncoder.saveBitmap(chart, file.toString(), BitmapFormat.PNG);
        return file;
    }

    /** A small CSV with a header line (the benchmarks write no quotes or commas inside fields). */
    record Table(List<Map<String, String>> rows) {

        static Table read(Path csv) {
            try {
                List<String> lines = Files.readAllLines(csv);
                if (lines.isEmpty()) {
                    throw new IllegalArgumentException(csv + " is empty");
                }
                String[] header = lines.get(0).split(",");
                List<Map<String, String>> rows = new ArrayList<>();
                for (String line : lines.subList(1, lines.size())) {
                    if (line.isBlank()) {
                        continue;
                    }
                    String[] f = line.split(",", -1);
                    if (f.length != header.length) {
                        throw new IllegalArgumentException(csv + ": '" + line + "' has " + f.length + " fields, the "
                                + "header " + header.length);
                    }
                    Map<String, String> row = new LinkedHashMap<>();
                    for (int i = 0; i < header.length; i++) {
                        row.put(header[i], f[i]);
                    }
                    rows.add(row);
                }
                return new Table(rows);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        /** Rows whose columns equal the given values (column, value, column, value, ...). */
        List<Map<String, String>> select(String... columnValues) {
            List<Map<String, String>> found = new ArrayList<>();
            for (Map<String, String> row : rows) {
                boolean match = true;
                for (int i = 0; i < columnValues.length; i += 2) {
                    match &= columnValues[i + 1].equals(row.get(columnValues[i]));
                }
                if (match) {
                    found.add(row);
                }
            }
            return found;
        }

        /** The value of the single row given, or null when there is none or it is not a number. */
        Double number(List<Map<String, String>> selected) {
            if (selected.size() != 1) {
                return null;
            }
            try {
                return Double.parseDouble(selected.get(0).get("value"));
            } catch (NumberFormatException | NullPointerException e) {
                return null;
            }
        }
    }
}
