B
pos_weightJ ┬ц╟BБ?°gк┬Kд?╥pюwН?Д╙Гэац?